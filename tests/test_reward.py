"""The reward, tasks, completions and the scoring engine, on the simulated GPU."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from reward_fakes import MarkedExecutor

from agent.trajectory import CORRECT, FAILED, HACK, hack_rule, milestone, noisy, reward
from learning.completion import cache_key, normalized, parse, prompt_messages, prompt_text
from learning.engine import Item, RewardEngine
from learning.tasks import DEFAULT_TASKS, TASK_SCHEMA, Task, TaskError, TaskSet, load_file
from sandbox.contract import CandidateResult, Status, Timing
from sandbox.testing import DEVICE

TASKS = TaskSet.load([DEFAULT_TASKS / "saxpy.cu", DEFAULT_TASKS / "relu_double.cu"])
SAXPY = TASKS.resolve("saxpy")
RELU = TASKS.resolve("relu_double")


def fence(code: str, head: str = "Here is a faster kernel.") -> str:
    return f"{head}\n```cuda\n{code}\n```\n"


def variant(task: Task, mark: str = "", n: int = 0) -> str:
    """A completion for ``task``: its kernel, with a marker macro (MarkedExecutor's verdicts) and
    ``n`` distinguishing the source."""
    macro = f"#define MARK_{mark or 'PLAIN'}_{n} 1\n" if mark or n else ""
    return fence(macro + task.target.definition)


def ok(
    low: float, median: float | None = None, high: float | None = None, **timing: object
) -> CandidateResult:
    median = median or low * 1.01
    t = Timing(1.0, 0.99, 1.01, 0.98, 50, 0.02, **timing)  # type: ignore[arg-type]
    return CandidateResult(
        "c", Status.OK, timing=t, speedup=median, speedup_low=low, speedup_high=high or median * 1.01
    )


# --------------------------------------------------------------------------- the reward


def test_reward_orders_hack_failure_correct_faster_much_faster() -> None:
    hacks = [
        CandidateResult("c", Status.REJECTED, "input `x` was modified"),
        CandidateResult("c", Status.REJECTED, "output `y` not written at index 3"),
        CandidateResult(
            "c", Status.MISMATCH, "n=4096: the outputs of the timed runs differ from the baseline's"
        ),
        replace(ok(3.0), precision="fp16 (half arithmetic)"),  # the task allows no lower precision
    ]
    failures = [CandidateResult("c", s, "x") for s in (Status.COMPILE_ERROR, Status.MISMATCH, Status.CRASH)]
    failures.append(None)  # no code
    correct, faster, much = ok(0.9), ok(1.2), ok(2.0)
    hack_rewards = [reward(h, allow_precision=()) for h in hacks]
    failure_rewards = [reward(f, allow_precision=()) for f in failures]
    assert set(hack_rewards) == {HACK}  # never shaped
    assert max(hack_rewards) < min(failure_rewards) and set(failure_rewards) == {FAILED}
    assert max(failure_rewards) < reward(correct) < reward(faster) < reward(much)
    assert [milestone(r, ()) for r in (hacks[0], failures[0], correct, faster, much)] == [
        "hack",
        "failed",
        "correct",
        "faster",
        "much_faster",
    ]
    assert [hack_rule(h, ()) for h in hacks] == [
        "input_modified",
        "output_not_written",
        "timed_outputs_differ",
        "precision",
    ]
    assert reward(replace(ok(3.0), precision="fp16 (half arithmetic)"), allow_precision=("fp16",)) > 3.0


def test_an_implausible_verdict_is_a_hack_by_name() -> None:
    class Later(str, enum.Enum):  # the sandbox's own name for the verdict, once it has one
        IMPLAUSIBLE = "implausible"

    r = replace(CandidateResult("c", Status.OK), status=Later.IMPLAUSIBLE, message="900% of peak")
    assert hack_rule(r) == "implausible_time" and reward(r) == HACK


def test_reward_is_monotonic_in_the_lower_bound_and_noise_never_raises_it() -> None:
    lows = [0.3 + 0.01 * i for i in range(700)]
    values = [reward(ok(low, median=low * 1.05, high=low * 1.1)) for low in lows]
    assert values == sorted(values)
    assert values[-1] == 4.0  # bounded
    # the same median with a wider interval (noise) lowers the reward, never raises it
    for median in (0.8, 1.1, 1.4, 1.7, 3.0):
        tight = reward(ok(median * 0.97, median, median * 1.03))
        wide = reward(ok(median * 0.85, median, median * 1.15))
        assert wide <= tight


def test_a_noisy_timing_is_capped_at_correct() -> None:
    shaky = ok(1.8, median=2.5, high=3.5)  # interval wider than a quarter of the speedup
    throttled = ok(2.0, throttled=True)
    multimodal = ok(2.0, modes=(0.5, 1.0))
    for r in (shaky, throttled, multimodal):
        assert noisy(r) and reward(r) <= CORRECT and milestone(r) == "correct"
    assert not noisy(ok(2.0)) and reward(ok(2.0)) > 3.0
    assert reward(CandidateResult("c", Status.OK)) == CORRECT  # verified, not timed


# --------------------------------------------------------------------------- tasks


def test_tasks_are_content_hashed_and_split_by_name(tmp_path: Path) -> None:
    assert SAXPY.ref == f"saxpy@{SAXPY.digest}" and len(SAXPY.digest) == 12
    assert SAXPY.describe()["schema"] == TASK_SCHEMA and SAXPY.describe()["kernel"] == "saxpy"
    edited = tmp_path / "saxpy.cu"
    edited.write_text(SAXPY.text.replace("y = alpha", "y := alpha"))
    again = load_file(edited)[0]
    assert again.digest != SAXPY.digest and again.split == SAXPY.split
    assert TASKS.resolve(SAXPY.ref) is SAXPY and TASKS.resolve("saxpy") is SAXPY
    with pytest.raises(TaskError, match="the task changed"):
        TASKS.resolve(again.ref)
    with pytest.raises(TaskError, match="no task 'nope'"):
        TASKS.resolve("nope@123")
    every = TaskSet.load([DEFAULT_TASKS])
    splits = {t.split for t in every}
    assert splits == {"train", "eval"} and len(every) >= 20


def test_a_file_without_a_spec_is_skipped_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "bare.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    (tmp_path / "saxpy.cu").write_text(SAXPY.text)
    tasks = TaskSet.load([tmp_path])
    assert [t.name for t in tasks] == ["saxpy"] and "no spec" in tasks.skipped[0]


# --------------------------------------------------------------------------- prompts and completions


def test_the_prompt_has_the_kernel_spec_and_device_but_no_measurement() -> None:
    measured = replace(DEVICE, peak_bandwidth_gbps=4321.0)
    messages = prompt_messages(SAXPY, measured)
    text = prompt_text(SAXPY, measured)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert SAXPY.target.definition in text and "@cuda-agent sizes" in text and "132 SMs" in text
    assert "4321" not in text and " ms" not in text
    assert prompt_text(SAXPY, measured) == prompt_text(SAXPY, replace(measured, peak_bandwidth_gbps=9.0))


def test_code_comes_from_a_fence_a_tool_call_or_chat_messages_else_no_code() -> None:
    code = SAXPY.target.definition
    fenced = parse(fence(code, "launch: block=256\nAssumption: x and y never alias"), SAXPY)
    assert fenced.proposal is not None and fenced.proposal.launch is not None
    assert fenced.proposal.launch.block == "256" and fenced.proposal.assumptions == ("x and y never alias",)
    call = {"name": "verify_and_time", "arguments": {"code": code, "grid": "cdiv(n, 512)"}}
    in_text = parse(f"Let me try.\n<tool_call>{json.dumps(call)}</tool_call>", SAXPY)
    assert in_text.proposal is not None and in_text.proposal.launch is not None
    assert in_text.proposal.launch.grid == "cdiv(n, 512)"
    openai = [
        {"role": "user", "content": "make it fast"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "verify_and_time", "arguments": json.dumps({"code": code})}}
            ],
        },
    ]
    assert parse(openai, SAXPY).proposal is not None
    assert parse([{"role": "assistant", "content": fence(code)}], SAXPY).proposal is not None
    for junk in ("I cannot help.", "```python\nprint(1)\n```", "<tool_call>{not json</tool_call>"):
        assert parse(junk, SAXPY).no_code.startswith("no code: ")
    other = parse(fence("__global__ void other(float* x) {}"), SAXPY)
    assert other.proposal is None and "`saxpy`" in other.no_code


def test_the_cache_key_ignores_layout_and_comments_only() -> None:
    code = SAXPY.target.definition
    a = parse(fence(code), SAXPY).proposal
    b = parse(fence("// mine\n" + code.replace("    ", "\t").replace(" + ", "+")), SAXPY).proposal
    c = parse(fence(code.replace("alpha * x[i]", "x[i] * alpha")), SAXPY).proposal
    assert a is not None and b is not None and c is not None
    assert normalized(a.code) == normalized(b.code) and cache_key(SAXPY, a) == cache_key(SAXPY, b)
    assert cache_key(SAXPY, a) != cache_key(SAXPY, c) and cache_key(SAXPY, a) != cache_key(RELU, a)


# --------------------------------------------------------------------------- the engine


def test_items_of_one_task_go_in_one_sandbox_request_and_come_back_in_order() -> None:
    ex = MarkedExecutor()
    engine = RewardEngine(ex, TASKS, workers=2)
    items = [
        Item(f"k{i}", (SAXPY if i % 2 else RELU).ref, variant(SAXPY if i % 2 else RELU, n=i + 1))
        for i in range(16)
    ]
    try:
        scored = engine.score(items)
    finally:
        engine.close()
    assert [s.key for s in scored] == [f"k{i}" for i in range(16)]
    assert [s.task for s in scored] == [(SAXPY if i % 2 else RELU).ref for i in range(16)]
    assert len(ex.requests) == 2 and sorted(len(r.candidates) for r in ex.requests) == [8, 8]
    assert {r.baseline.name for r in ex.requests} == {SAXPY.target.kernel, RELU.target.kernel}
    assert all(s.milestone == "much_faster" and not s.cached and s.pairs == 0 for s in scored)


def test_verdicts_reach_the_reward_with_their_facts() -> None:
    ex = MarkedExecutor()
    engine = RewardEngine(ex, TASKS)
    marks = ["HACK_INPUT", "HACK_TIMER", "WRONG", "SLOW", "BARELY", "", "NOISY"]
    items = [Item(m or "plain", SAXPY.ref, variant(SAXPY, m, 1)) for m in marks]
    items += [
        Item("broken", SAXPY.ref, fence(SAXPY.target.definition.replace("int i", "int i = oops"))),
        Item("prose", SAXPY.ref, "I would vectorise it."),
    ]
    try:
        got = {s.key: s for s in engine.score(items)}
    finally:
        engine.close()
    assert got["HACK_INPUT"].rule == "input_modified" and got["HACK_TIMER"].rule == "implausible_time"
    assert got["broken"].verdict == "compile_error" and got["prose"].verdict == "no_code"
    order = ["HACK_INPUT", "broken", "SLOW", "BARELY", "plain"]
    values = [got[k].reward for k in order]
    assert values == sorted(values) and len(set(values)) == len(values)  # type: ignore[type-var]
    assert got["HACK_TIMER"].reward == got["HACK_INPUT"].reward == HACK
    assert got["WRONG"].reward == got["prose"].reward == FAILED
    noisy_one = got["NOISY"]
    assert noisy_one.noisy and noisy_one.retimed and noisy_one.milestone == "correct"
    retimes = [r for r in ex.requests if r.id.endswith("-retime")]
    assert len(retimes) == 1 and len(retimes[0].candidates) == 1
    assert got["plain"].speedup == pytest.approx(2.0) and got["plain"].speedup_low < 2.0


def test_a_repeated_completion_is_evaluated_once() -> None:
    ex = MarkedExecutor()
    engine = RewardEngine(ex, TASKS)
    same = variant(SAXPY, n=7)
    spaced = same.replace("    ", "  ")  # the same tokens
    try:
        first = engine.score([Item("a", SAXPY.ref, same), Item("b", SAXPY.ref, spaced)])
        again = engine.score([Item("c", "saxpy", same)])
    finally:
        engine.close()
    assert len(ex.requests) == 1 and len(ex.requests[0].candidates) == 1
    assert [s.cached for s in first] == [False, True] and again[0].cached
    assert first[0].reward == first[1].reward == again[0].reward is not None
    assert engine.stats()["evaluated"] == 1 and engine.stats()["cache_hits"] == 1


def test_past_its_deadline_an_item_is_null_with_the_reason() -> None:
    ex = MarkedExecutor(delay_s=30.0)
    engine = RewardEngine(ex, TASKS, workers=2)
    items = [
        Item("slow", SAXPY.ref, variant(SAXPY, n=3), deadline_s=0.2),
        Item("prose", SAXPY.ref, "no code"),
    ]
    try:
        scored = engine.score(items)
        batch = engine.score([Item("late", RELU.ref, variant(RELU, n=4))], deadline_s=0.2)
    finally:
        engine.close()
    assert scored[0].reward is None and scored[0].reason.startswith("deadline")
    assert scored[1].reward == FAILED  # decided without the sandbox
    assert batch[0].reward is None and "deadline" in batch[0].reason
    assert engine.stats()["timeouts"] == 2


def test_a_task_whose_own_kernel_fails_gives_null_rewards() -> None:
    class Down(MarkedExecutor):
        def evaluate(self, request, **kw):  # type: ignore[no-untyped-def]
            result = super().evaluate(request, **kw)
            return replace(
                result, baseline=replace(result.baseline, status=Status.CRASH, message="illegal address")
            )

    engine = RewardEngine(Down(), TASKS)
    try:
        scored = engine.score([Item("x", SAXPY.ref, variant(SAXPY, n=9))])
    finally:
        engine.close()
    assert scored[0].reward is None and "task's own kernel failed" in scored[0].reason
    assert not math.isnan(engine.stats()["rewards_per_s"])


def test_reward_tasks_prompts_are_typed_rows(capsys: pytest.CaptureFixture[str]) -> None:
    from learning.completion import PromptRow
    from sandbox.contract import from_json
    from server.cli.main import main

    args = ["reward", "tasks", "--prompts", "--tasks", str(DEFAULT_TASKS / "saxpy.cu")]
    assert main(args) == 0
    (line,) = capsys.readouterr().out.splitlines()
    row = from_json(PromptRow, line)
    assert row.task == TASKS.resolve("saxpy").ref and [m["role"] for m in row.prompt] == ["system", "user"]


def test_milestones_are_an_ordered_enum_with_their_levels() -> None:
    from agent.trajectory import Milestone

    levels = [m.level for m in Milestone]
    assert levels == sorted(levels) and Milestone.HACK.level == HACK and Milestone.CORRECT.level == CORRECT
    assert milestone(None) is Milestone.FAILED and json.dumps(Milestone.FASTER) == '"faster"'


def test_the_client_reads_typed_scores_and_refuses_another_shape() -> None:
    import httpx

    from agent.trajectory import Milestone
    from learning import client
    from learning.wire import Item, Scored
    from sandbox.contract import to_dict

    body = client._body([Item("0", "saxpy", "```cuda\n```")], 30.0, "r1")
    assert body == {
        "id": "r1",
        "items": [{"key": "0", "task": "saxpy", "completion": "```cuda\n```", "deadline_s": None}],
        "deadline_s": 30.0,
    }
    scored = Scored("0", "saxpy@abc", 3.2, Milestone.MUCH_FASTER, "ok", speedup_low=1.8)
    answer = {"id": "r1", "reward_version": scored.reward_version, "results": [to_dict(scored)]}
    (back,) = client._results(httpx.Response(200, json=answer))
    assert back == scored and back.milestone is Milestone.MUCH_FASTER
    assert client._verl_score(back, 0.0)["milestone"] == Milestone.MUCH_FASTER.level
    with pytest.raises(client.RewardError, match="not a reward response"):
        client._results(httpx.Response(200, json={"results": [{"reward": "high"}]}))
