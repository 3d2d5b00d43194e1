"""``cuda-agent reward serve`` on loopback: the HTTP contract, its limits, and each trainer's
adapter called exactly as its trainer calls it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from polling import poll_until
from reward_fakes import MarkedExecutor

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from agent.trajectory import FAILED, HACK
from base.asgi import make_server
from base.http import listen
from learning import client as adapters
from learning.engine import RewardEngine
from learning.service import RewardLimits, RewardService
from learning.tasks import DEFAULT_TASKS, TaskSet

TASKS = TaskSet.load([DEFAULT_TASKS / "saxpy.cu", DEFAULT_TASKS / "relu_double.cu"])
SAXPY = TASKS.resolve("saxpy")
TOKEN = "s3cret-reward-token"


def fence(code: str) -> str:
    return f"```cuda\n{code}\n```"


def kernel(mark: str = "", n: int = 1) -> str:
    return fence(f"#define MARK_{mark or 'PLAIN'}_{n} 1\n" + SAXPY.target.definition)


@dataclass
class Running:
    url: str
    executor: MarkedExecutor
    headers: dict[str, str]

    def post(self, path: str, body: object, **kw: object) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, headers=self.headers, timeout=60, **kw)  # type: ignore[arg-type]


@contextlib.contextmanager
def running(
    limits: RewardLimits | None = None, delay_s: float = 0.0, token: str | None = TOKEN
) -> Iterator[Running]:
    """The reward service over a marked simulated GPU, served by uvicorn on a free loopback port."""
    executor = MarkedExecutor(delay_s=delay_s)
    engine = RewardEngine(executor, TASKS, workers=2)
    app = RewardService(engine, token=token, limits=limits or RewardLimits())
    sock = listen("127.0.0.1", 0)
    server = make_server(app.app, log_level="warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the reward service did not come up"
        time.sleep(0.02)
    try:
        yield Running(url, executor, {"Authorization": f"Bearer {token}"} if token else {})
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@pytest.fixture(scope="module")
def svc() -> Iterator[Running]:
    with running() as r:
        yield r


# --------------------------------------------------------------------------- the contract


def test_reward_batch_returns_facts_in_order(svc: Running) -> None:
    items = [
        {"key": "hack", "task": SAXPY.ref, "completion": kernel("HACK_INPUT")},
        {"key": "wrong", "task": SAXPY.ref, "completion": kernel("WRONG")},
        {"key": "fast", "task": "saxpy", "completion": kernel("", 2)},
        {"key": "chat", "task": SAXPY.ref, "completion": [{"role": "assistant", "content": kernel("", 2)}]},
        {"key": "prose", "task": SAXPY.ref, "completion": "Use shared memory."},
    ]
    r = svc.post("/reward", {"items": items})
    assert r.status_code == 200, r.text
    body = r.json()
    got = body["results"]
    assert [x["key"] for x in got] == ["hack", "wrong", "fast", "chat", "prose"]
    assert got[0]["reward"] == HACK and got[0]["rule"] == "input_modified" and got[0]["verdict"] == "rejected"
    assert got[1]["reward"] == FAILED and got[1]["verdict"] == "mismatch"
    assert (
        got[2]["milestone"] == "much_faster"
        and got[2]["speedup_low"] < got[2]["speedup"] < got[2]["speedup_high"]
    )
    assert got[3]["reward"] == got[2]["reward"] and got[3]["cached"]
    assert got[4]["verdict"] == "no_code" and got[4]["message"].startswith("no code")
    assert body["reward_version"] == got[0]["reward_version"] == "cuda-agent.reward/2"


def test_a_retried_request_id_is_answered_once(svc: Running) -> None:
    body = {"id": "retry-1", "items": [{"key": "a", "task": SAXPY.ref, "completion": kernel("", 31)}]}
    before = len(svc.executor.requests)
    first = svc.post("/reward", body)
    second = svc.post("/reward", body)
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json() and len(svc.executor.requests) == before + 1


def test_tasks_and_stats(svc: Running) -> None:
    listed = httpx.get(f"{svc.url}/tasks?prompts=1", headers=svc.headers).json()["tasks"]
    assert {t["task"] for t in listed} == {SAXPY.ref, TASKS.resolve("relu_double").ref}
    saxpy = next(t for t in listed if t["name"] == "saxpy")
    assert saxpy["prompt"][1]["content"].count(SAXPY.target.definition) >= 1 and saxpy["split"] in (
        "train",
        "eval",
    )
    stats = httpx.get(f"{svc.url}/stats", headers=svc.headers).json()
    assert {
        "rewards_per_s",
        "queue",
        "running",
        "cache_entries",
        "devices",
        "sandbox_requests",
        "gpus",
    } <= set(stats)
    assert stats["gpus"][0]["queued"] == 0
    assert stats["devices"][0]["name"] == "simulated GPU"


def test_401_without_the_token(svc: Running) -> None:
    body = {"items": [{"key": "a", "task": SAXPY.ref, "completion": kernel()}]}
    assert httpx.post(f"{svc.url}/reward", json=body).status_code == 401
    wrong = httpx.post(f"{svc.url}/reward", json=body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "wrong bearer token" in wrong.json()["error"]
    assert httpx.get(f"{svc.url}/tasks").status_code == 401
    assert httpx.get(f"{svc.url}/health").status_code == 200


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "items"),
        ({"items": []}, "items"),
        ({"items": [{"key": "a", "task": "nope", "completion": "x"}]}, "items[0].task"),
        ({"items": [{"key": "a", "task": "saxpy@000000000000", "completion": "x"}]}, "items[0].task"),
        ({"items": [{"key": "a", "task": "saxpy", "completion": 3}]}, "items[0].completion"),
        ({"items": [{"key": "a", "task": "saxpy", "completion": "x" * 5000}]}, "items[0].completion"),
        (
            {"items": [{"key": "a", "task": "saxpy", "completion": "x", "deadline_s": -1}]},
            "items[0].deadline_s",
        ),
        ({"deadline_s": "soon", "items": [{"key": "a", "task": "saxpy", "completion": "x"}]}, "deadline_s"),
        ({"items": [{"key": "a\n", "task": "saxpy", "completion": "x"}]}, "items[0].key"),
        ([1, 2], "body"),
    ],
)
def test_422_names_the_field(body: object, field: str) -> None:
    with running(RewardLimits(max_completion_bytes=4096, max_items=4)) as svc:
        r = svc.post("/reward", body)
        assert r.status_code == 422 and r.json()["field"] == field, r.text


def test_413_and_429() -> None:
    with running(RewardLimits(max_body_bytes=2048, max_per_client=1), delay_s=30.0) as svc:
        big = svc.post("/reward", {"items": [{"key": "a", "task": "saxpy", "completion": "x" * 4096}]})
        assert big.status_code == 413
        slow = {"deadline_s": 3, "items": [{"key": "a", "task": "saxpy", "completion": kernel("", 41)}]}
        answers: list[httpx.Response] = []
        worker = threading.Thread(target=lambda: answers.append(svc.post("/reward", slow)))
        worker.start()
        poll_until(lambda: len(svc.executor.requests) == 1, 20, "the first request to reach the sandbox")
        refused = svc.post("/reward", slow)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        poll_until(lambda: not worker.is_alive(), 20, "the slow request to end")
        assert answers[0].status_code == 200 and answers[0].json()["results"][0]["reward"] is None


def test_deadline_past_returns_null_with_reason() -> None:
    with running(delay_s=30.0) as svc:
        items = [
            {"key": "slow", "task": "saxpy", "completion": kernel("", 51), "deadline_s": 0.3},
            {"key": "none", "task": "saxpy", "completion": "no code here"},
        ]
        got = svc.post("/reward", {"items": items}).json()["results"]
        assert got[0]["reward"] is None and got[0]["reason"].startswith("deadline")
        assert got[1]["reward"] == FAILED


# --------------------------------------------------------------------------- the adapters


def test_trl_reward_function_sync_and_async(svc: Running) -> None:
    sync = adapters.trl_reward_func(svc.url, TOKEN)
    prompts = ["p0", "p1", "p2"]
    completions = [kernel("", 61), kernel("HACK_TIMER", 61), "nothing"]
    completion_ids = [[1, 2], [3], [4, 5, 6]]
    tasks = [SAXPY.ref] * 3
    got = sync(
        prompts=prompts,
        completions=completions,
        completion_ids=completion_ids,
        task=tasks,
        difficulty=[1, 2, 3],
    )
    assert got[0] is not None and got[0] > 3.0 and got[1] == HACK and got[2] == FAILED
    assert sync.__name__ == "cuda_agent_reward"
    chat = [[{"role": "assistant", "content": c}] for c in completions]
    conv_prompts = [[{"role": "user", "content": p}] for p in prompts]
    afn = adapters.trl_async_reward_func(svc.url, TOKEN)
    assert asyncio.iscoroutinefunction(afn)
    assert (
        asyncio.run(afn(prompts=conv_prompts, completions=chat, completion_ids=completion_ids, task=tasks))
        == got
    )
    with pytest.raises(adapters.RewardError, match="no `task` column"):
        sync(prompts=prompts, completions=completions, completion_ids=completion_ids)


def test_verl_compute_score_and_batch(svc: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(adapters.ENV_URL, svc.url)
    monkeypatch.setenv(adapters.ENV_TOKEN, TOKEN)
    one = adapters.compute_score("cuda-agent", kernel("", 71), SAXPY.ref, extra_info={"index": 0})
    assert one["score"] > 3.0 and one["milestone"] == 3.0 and one["hack"] == 0.0
    batch = adapters.compute_score_batch(
        data_sources=["cuda-agent"] * 2,
        solution_strs=[kernel("HACK_INPUT", 71), "no code"],
        ground_truths=[SAXPY.ref] * 2,
        extra_infos=[{"index": 1}, {"index": 2}],
    )
    assert [b["score"] for b in batch] == [HACK, FAILED] and batch[0]["hack"] == 1.0
    assert set(one) == set(batch[0])  # the same keys for every item


def test_openrlhf_remote_reward_payload(svc: Running) -> None:
    prompt = "<|user|>make saxpy faster<|assistant|>"
    payload = {
        "query": [prompt + kernel("", 81), prompt + kernel("WRONG", 81)],
        "prompts": [prompt, prompt],
        "labels": [SAXPY.ref, SAXPY.ref],
    }
    # OpenRLHF posts JSON with no Authorization header: serve it on loopback without a token
    with running(token=None) as open_svc:
        r = httpx.post(f"{open_svc.url}/openrlhf", json=payload, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewards"] == body["scores"] and body["rewards"][0] > 3.0 and body["rewards"][1] == FAILED
    assert body["extra_logs"]["milestone"] == [3.0, -1.0] and body["extra_logs"]["scored"] == [1.0, 1.0]
    bad = svc.post("/openrlhf", {"query": ["a"], "prompts": ["a"], "labels": []})
    assert bad.status_code == 422 and bad.json()["field"] == "labels"


# --------------------------------------------------------------------------- the CLI


def test_reward_score_cli_on_the_simulated_gpu(tmp_path: Path) -> None:
    answer = tmp_path / "answer.cu"
    answer.write_text("#define UNROLL 1\n" + SAXPY.target.definition)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_")}
    env["CUDA_AGENT_TEST_EXECUTOR"] = "1"
    argv = [sys.executable, "-m", "server", "reward", "score"]
    proc = subprocess.run(
        [*argv, "saxpy", str(answer), "--json"], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    scored = json.loads(proc.stdout)
    assert scored["task"] == SAXPY.ref and scored["milestone"] == "much_faster" and scored["reward"] > 3.0
    stale = subprocess.run(
        [*argv, "saxpy@0123", str(answer)], capture_output=True, text=True, timeout=120, env=env
    )
    assert stale.returncode == 2 and "the task changed" in stale.stderr and "Traceback" not in stale.stderr


def test_reward_serve_cli_refuses_a_public_address_without_token() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "server", "reward", "serve", "--simulate", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "refusing to listen on 0.0.0.0" in proc.stderr
    assert "Traceback" not in proc.stderr


def _fake_verifiers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The part of ``verifiers`` (0.4) and ``datasets`` an environment is built from: ``Rubric(funcs=,
    weights=)``, ``SingleTurnEnv(dataset=, rubric=, **kw)``, ``Dataset.from_list`` (the real
    packages are not installed here: verifiers pulls in transformers and openai)."""
    import types

    vf = types.ModuleType("verifiers")
    ds = types.ModuleType("datasets")

    class Rubric:
        def __init__(self, funcs: list[object], weights: list[float]) -> None:
            self.funcs, self.weights = funcs, weights

    class SingleTurnEnv:
        def __init__(self, dataset: object, rubric: Rubric, **kwargs: object) -> None:
            self.dataset, self.rubric, self.kwargs = dataset, rubric, kwargs

    class Dataset(list):  # type: ignore[type-arg]
        @classmethod
        def from_list(cls, rows: list[dict[str, object]]) -> Dataset:
            return cls(rows)

    vf.Rubric, vf.SingleTurnEnv, ds.Dataset = Rubric, SingleTurnEnv, Dataset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "verifiers", vf)
    monkeypatch.setitem(sys.modules, "datasets", ds)


def test_verifiers_environment_scores_through_the_service(
    svc: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    from learning.verifiers_env import load_environment

    _fake_verifiers(monkeypatch)
    env = load_environment(svc.url, TOKEN, split="", system_prompt="be fast")
    rows = {r["answer"]: r for r in env.dataset}
    assert set(rows) == {SAXPY.ref, TASKS.resolve("relu_double").ref}
    assert rows[SAXPY.ref]["prompt"][1]["content"].count(SAXPY.target.definition) >= 1
    assert env.kwargs == {"system_prompt": "be fast"} and env.rubric.weights == [1.0]
    (reward,) = env.rubric.funcs
    assert reward.__name__ == "cuda_agent_reward" and asyncio.iscoroutinefunction(reward)
    chat = [{"role": "assistant", "content": kernel("", 81)}]
    fast = asyncio.run(reward(completion=chat, answer=SAXPY.ref, prompt=[], state={}, info={}))
    hack = asyncio.run(reward(completion=kernel("HACK_TIMER", 81), answer=SAXPY.ref))
    prose = asyncio.run(reward(completion="Use shared memory.", answer=SAXPY.ref))
    assert fast > 3.0 and hack == HACK and prose == FAILED
    with pytest.raises(adapters.RewardError, match=r"answered 40[13]"):
        load_environment(svc.url, "wrong-token")


def test_verifiers_is_imported_only_when_an_environment_is_built() -> None:
    probe = "import sys, learning.verifiers_env; print('verifiers' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"
