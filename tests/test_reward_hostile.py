"""Malformed completions get per-item verdicts, never an HTTP 500 for the batch (issue 37), and
the optimize loop's LLM proposer survives the same hostile tool arguments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from loop_fakes import MarkerExecutor, saxpy_target, variant
from reward_fakes import MarkedExecutor
from scripted_llm import Call, Say, ScriptedLLM

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from agent.llm import LLMProposer, LLMSettings
from agent.loop import LoopSettings, optimize
from agent.proposer import OptimizeBudget
from learning.engine import RewardEngine
from learning.service import RewardLimits, RewardService
from learning.tasks import DEFAULT_TASKS, TaskSet

TASKS = TaskSet.load([DEFAULT_TASKS / "saxpy.cu", Path(__file__).parent.parent / "bench/torch_tasks/relu.py"])
SAXPY = TASKS.resolve("saxpy")
RELU = TASKS.resolve("torch.relu")
CODE = SAXPY.target.definition
DEEP = "[" * 100_000 + "]" * 100_000
MODEL = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x) * ({})\n"


def call(args: dict[str, Any] | str) -> list[dict[str, Any]]:
    """A chat completion whose assistant message calls verify_and_time with ``args``."""
    text = args if isinstance(args, str) else json.dumps(args)
    function = {"name": "verify_and_time", "arguments": text}
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "1", "type": "function", "function": function}],
        }
    ]


def tagged(args: dict[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": "verify_and_time", "arguments": args}) + "</tool_call>"


HOSTILE: dict[str, tuple[str, Any]] = {  # name: (task, completion)
    "assumptions 5": ("saxpy", call({"code": CODE, "assumptions": 5})),
    "assumptions 5 in text": ("saxpy", tagged({"code": CODE, "assumptions": 5})),
    "tool_calls 5": ("saxpy", [{"role": "assistant", "content": "x", "tool_calls": 5}]),
    "tool_calls [5]": ("saxpy", [{"role": "assistant", "content": "x", "tool_calls": [5, {"function": 5}]}]),
    "nested tool-call text": (
        "saxpy",
        '<tool_call>{"name":"verify_and_time","arguments":' + DEEP + "}</tool_call>",
    ),
    "nested tool-call arguments": ("saxpy", call('{"code":' + DEEP + "}")),
    "surrogate precision": ("saxpy", "precision: \ud800\n```cuda\n" + CODE + "\n```\n"),
    "surrogate smem": ("saxpy", call({"code": CODE, "grid": "1", "block": "1", "smem": "\ud800"})),
    "surrogate launch line": ("saxpy", "launch: grid=\ud800, block=256\n```cuda\n" + CODE + "\n```\n"),
    "surrogate grid argument": ("saxpy", call({"code": CODE, "grid": "\ud800(n)"})),
    "2,000-term chain": ("torch.relu", "```python\n" + MODEL.format("+".join(["1"] * 2000)) + "```"),
    "200,000 unary minuses": ("torch.relu", "```python\n" + MODEL.format("-" * 200_000 + "1") + "```"),
}


@pytest.fixture(scope="module")
def http() -> TestClient:
    engine = RewardEngine(MarkedExecutor(), TASKS, workers=2)
    return TestClient(RewardService(engine, token=None, limits=RewardLimits()).app)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_each_hostile_completion_gets_its_own_verdict(http: TestClient, name: str) -> None:
    task, completion = HOSTILE[name]
    good = {"key": "good", "task": "saxpy", "completion": f"```cuda\n#define KEEP_{len(name)} 1\n{CODE}\n```"}
    # the body as a trainer's JSON library writes it (a lone surrogate as a \ud800 escape)
    body = json.dumps({"items": [{"key": "bad", "task": task, "completion": completion}, good]})
    r = http.post("/reward", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    r.content.decode("ascii")  # ASCII JSON: an echoed surrogate is an escape, never a broken encoding
    bad, ok = r.json()["results"]
    assert bad["key"] == "bad" and bad["reward"] is not None and bad["verdict"], bad
    assert ok["key"] == "good" and ok["verdict"] == "ok", ok  # the rest of the batch is scored


def test_a_body_nested_past_the_cap_is_a_422(http: TestClient) -> None:
    completion: Any = [{"role": "assistant", "content": "x"}]
    for _ in range(100):
        completion = [completion]
    r = http.post("/reward", json={"items": [{"task": "saxpy", "completion": completion}]})
    assert r.status_code == 422 and "nested deeper" in r.json()["error"]


def test_the_llm_proposer_survives_hostile_tool_arguments() -> None:
    """``assumptions: 5`` once killed the proposer's thread (a traceback; 0 attempts)."""
    t = saxpy_target()
    hostile = (
        ("verify_and_time", {"code": variant(t, "speedup=1.5"), "assumptions": 5}),
        ("verify_and_time", {"code": variant(t, "speedup=1.5"), "precision": {"a": 1}}),
        ("verify_and_time", {"code": 7}),
        ("verify_and_time", {"code": variant(t, "speedup=1.5"), "grid": [1]}),
        ("verify_and_time", '{"code":' + DEEP + "}"),
    )
    script = [Call(hostile), Call((("verify_and_time", {"code": variant(t, "speedup=1.8")}),)), Say("done")]
    with ScriptedLLM(script) as server:
        settings = LLMSettings(base_url=server.url, model="m", samples=1, max_turns=4, timeout_s=5)
        proposer = LLMProposer(settings)
        try:
            result = optimize(
                t,
                proposer,
                MarkerExecutor(),
                budget=OptimizeBudget(wall_s=30),
                settings=LoopSettings(batch_size=4),
            )
        finally:
            proposer.close()
    assert result.attempts == 1 and result.speedup == pytest.approx(1.8), result.stop
    answers = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert len(answers) == len(hostile) and all(a["content"].startswith("Error") for a in answers), answers


def test_health_says_how_compiles_are_isolated() -> None:
    engine = RewardEngine(MarkedExecutor(), TASKS, workers=1)
    service = RewardService(engine, token="t", limits=RewardLimits(), isolation="bwrap+landlock")
    health = TestClient(service.app).get("/health")  # open without the token
    assert health.status_code == 200 and health.json()["isolation"] == "bwrap+landlock"
