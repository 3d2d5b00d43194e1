"""A ``verifiers`` environment over ``cuda-agent reward serve`` (Prime Intellect's convention).

``load_environment(**kwargs)`` returns a :class:`verifiers.SingleTurnEnv`: one row per task of the
service (``GET /tasks?prompts=1``: the prompt's chat messages, ``answer`` the task's
``name@hash``) and a :class:`verifiers.Rubric` whose one reward function sends the completion to
``POST /reward`` (:class:`~learning.client.RewardClient`: the trainer's process compiles and runs
nothing).  ``verifiers`` is an optional extra (``pip install 'cuda-agent[verifiers]'``), imported
only when an environment is built.

Keyword arguments: ``url``, ``token`` (else ``CUDA_AGENT_REWARD_URL`` / ``CUDA_AGENT_REWARD_TOKEN``),
``split`` (``train``/``eval``; "" every task), ``deadline_s`` (per reward request),
``missing_reward`` (the score of a completion that got no reward, e.g. past its deadline;
default 0); anything else goes to ``SingleTurnEnv`` (``system_prompt``, ``max_concurrent``...).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any

from learning.client import RewardClient
from learning.wire import Item

REWARD_NAME = "cuda_agent_reward"


def reward_function(
    client: RewardClient, deadline_s: float | None = None, missing_reward: float = 0.0
) -> Callable[..., Awaitable[float]]:
    """The rubric's reward function: ``(completion, answer) -> float`` as ``verifiers`` calls it
    (``completion``: chat messages or text; ``answer``: the task)."""

    async def reward(completion: Any, answer: str, **kwargs: Any) -> float:
        (result,) = await client.ascore([Item("0", str(answer), completion)], deadline_s)
        return missing_reward if result.reward is None else float(result.reward)

    reward.__name__ = REWARD_NAME
    return reward


def load_environment(
    url: str | None = None,
    token: str | None = None,
    *,
    split: str = "train",
    deadline_s: float | None = None,
    missing_reward: float = 0.0,
    **env_kwargs: Any,
) -> Any:
    """The environment (see the module docstring)."""
    vf = importlib.import_module("verifiers")
    datasets = importlib.import_module("datasets")  # verifiers' own dependency
    client = RewardClient(url, token)
    rows = [
        {"prompt": t["prompt"], "answer": t["task"], "info": {"kind": t["kind"]}} for t in client.tasks(split)
    ]
    rubric = vf.Rubric(funcs=[reward_function(client, deadline_s, missing_reward)], weights=[1.0])
    return vf.SingleTurnEnv(dataset=datasets.Dataset.from_list(rows), rubric=rubric, **env_kwargs)
