"""The LLM proposer against a scripted OpenAI-compatible server on loopback (real HTTP): tool
calls, fenced code, malformed replies, timeouts, cancellation, endpoint failures, the API key."""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import time
from dataclasses import replace
from typing import Any

import pytest
from loop_fakes import MarkerExecutor, saxpy_target, variant
from scripted_llm import Call, Fail, Garbage, Say, ScriptedLLM, Slow

from agent.llm import LLMProposer, LLMSettings, extract_code
from agent.loop import LoopSettings, OptimizeResult, RunOutcome, Stop, StopKind, optimize
from agent.proposer import OptimizeBudget
from agent.trajectory import TrajectoryLog
from cudasrc.launch import LaunchChange
from sandbox.compile_pool import CompilePool
from sandbox.testing import FakeExecutor

T = saxpy_target()
KEY = "sk-test-4f1c9e"


def settings(server: ScriptedLLM, **kw: Any) -> LLMSettings:
    base: dict[str, Any] = dict(
        base_url=server.url,
        model="scripted-coder",
        samples=1,
        max_turns=4,
        timeout_s=5,
        api_key_env="TEST_LLM_KEY",
    )
    return LLMSettings(**{**base, **kw})


def run(s: LLMSettings, **kw: Any) -> OptimizeResult:
    proposer = LLMProposer(s, compiler=kw.pop("compiler", None))
    try:
        return optimize(
            T,
            proposer,
            MarkerExecutor(),
            budget=OptimizeBudget(wall_s=30),
            settings=LoopSettings(batch_size=4),
            **kw,
        )
    finally:
        proposer.close()


def last(server: ScriptedLLM, i: int) -> dict[str, Any]:
    return server.requests[i].body["messages"][-1]


def test_tool_calls_verify_profile_and_finish(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", KEY)
    script = [
        Call(
            (
                (
                    "verify_and_time",
                    {
                        "code": variant(T, "speedup=1.8"),
                        "description": "unrolled",
                        "assumptions": ["x, y never alias"],
                    },
                ),
            )
        ),
        Call((("profile", {"candidate": "b0-c0"}),)),
        Say("Done: 1.8x faster."),
    ]
    log = TrajectoryLog(tmp_path / "t.jsonl")
    with ScriptedLLM(script) as server:
        res = run(settings(server), trajectory=log)
    assert res.outcome is RunOutcome.IMPROVED and res.speedup == pytest.approx(1.8)
    assert res.assumptions == ("x, y never alias",) and res.best is not None
    assert res.best.proposal.description == "unrolled"
    assert res.stop == Stop(StopKind.PROPOSER_EXHAUSTED)
    first = server.requests[0].body
    assert server.requests[0].authorization == f"Bearer {KEY}"
    assert first["model"] == "scripted-coder"
    assert {t["function"]["name"] for t in first["tools"]} == {
        "verify_and_time",
        "profile",
    }  # no compiler given
    prompt = first["messages"][1]["content"]
    for needle in (
        "Marker GPU",
        "132 SMs",
        "4300 GB/s",
        "compute capability 9.0",
        T.definition,
        "@cuda-agent sizes",
    ):
        assert needle in prompt
    assert "n=4097" in prompt and "1 ms median" in prompt
    verdict = last(server, 1)
    assert verdict["role"] == "tool" and verdict["tool_call_id"] == "call_0"
    assert "Candidate b0-c0: ok" in verdict["content"] and "Speedup 1.800x" in verdict["content"]
    assert "16 registers" in last(server, 2)["content"]
    usage = sum(1 for _ in server.requests)
    assert res.tokens > 0 and usage == 3
    line = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    roles = [m["role"] for m in line["proposal"]["transcript"]]
    assert roles == ["system", "user", "assistant"]
    assert "[tool call verify_and_time]" in line["proposal"]["transcript"][-1]["content"]
    assert line["proposer"] == "llm:scripted-coder"


def test_malformed_replies_are_answered_and_cost_a_turn() -> None:
    script = [
        Call(
            (
                ("verify_and_time", "{not json"),
                ("nonexistent", {}),
                ("verify_and_time", {"code": "int x;"}),
            )
        ),
        Garbage("this is not a chat completion"),  # retried once
        Call((("verify_and_time", {"code": variant(T, "mismatch")}),)),
        Say("I give up."),
    ]
    with ScriptedLLM(script) as server:
        res = run(settings(server))
    answers = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["call_0", "call_1", "call_2"]
    assert "not a valid JSON object" in answers[0]["content"]
    assert "there is no tool 'nonexistent'" in answers[1]["content"]
    assert "complete definition of the __global__ kernel `saxpy`" in answers[2]["content"]
    assert server.requests[2].body["messages"] == server.requests[1].body["messages"]  # the retry
    mismatch = last(server, 3)["content"]
    assert "mismatch" in mismatch and "n=4097" in mismatch and "first bad index 4096" in mismatch
    assert res.outcome is RunOutcome.NOT_IMPROVED and res.attempts == 1
    assert res.stop == Stop(StopKind.PROPOSER_EXHAUSTED)


def test_a_server_without_tool_calling_gets_fenced_code() -> None:
    refusal = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    fenced = [
        Say(
            "Wider blocks, same work per thread.\nlaunch: block=256\nAssumption: n < 2^31\n"
            f"```cuda\n{variant(T, 'speedup=2.2')}```"
        ),
        Say("Let me think about it some more."),
        Say(f"```cuda\n{variant(T, 'speedup=1.1', '/*b*/ ')}```"),
    ]

    def script(body: dict[str, Any], i: int):
        return Fail(400, refusal) if "tools" in body else fenced[i - 1]

    with ScriptedLLM(script) as server:
        res = run(settings(server, max_turns=3))
    assert "tools" in server.requests[0].body and "tools" not in server.requests[1].body
    assert "```cuda" in server.requests[1].body["messages"][0]["content"]
    assert res.outcome is RunOutcome.IMPROVED and res.speedup == pytest.approx(2.2)
    assert res.best is not None and res.best.proposal.launch == LaunchChange(block="256")
    assert res.best.proposal.assumptions == ("n < 2^31",)
    assert res.best.proposal.description == "Wider blocks, same work per thread."
    assert "saxpy<<<(n + (256 - 1)) / 256, 256>>>" in res.rewritten
    assert "Speedup 2.200x" in last(server, 2)["content"]
    assert "No kernel found in your reply" in last(server, 3)["content"]
    assert len(server.requests) == 4 and res.attempts == 2  # max_turns=3 ends the conversation


def test_tools_on_with_a_refusing_server_ends_the_run() -> None:
    with ScriptedLLM([Fail(400, "tool calling is not supported")]) as server:
        res = run(settings(server, tools="on"))
    assert res.stop.kind is StopKind.PROPOSER_FAILED and res.stop.detail.startswith(
        "the server refuses tool calls"
    )


def test_a_server_that_never_replies_in_time_fails_the_run() -> None:
    with ScriptedLLM(lambda body, i: Slow(3, Say("too late"))) as server:
        t0 = time.monotonic()
        res = run(settings(server, timeout_s=0.4))
        took = time.monotonic() - t0
    assert len(server.requests) == 2  # the request and one retry
    # no conversation got one reply: the endpoint failed, the search was not exhausted
    assert res.stop.kind is StopKind.PROPOSER_FAILED and res.attempts == 0
    assert "answered no request: no reply within 0.4 s" in res.stop.detail
    assert took < 4.5  # two 0.4 s timeouts, not two 3 s replies


def test_cancelling_during_a_request_abandons_it_and_keeps_the_best() -> None:
    cancel = threading.Event()
    script = [Call((("verify_and_time", {"code": variant(T, "speedup=2.0")}),)), Slow(30, Say("late"))]
    with ScriptedLLM(script) as server:
        cancelled_at: list[float] = []

        def cancel_when_second_request_arrives() -> None:
            while len(server.requests) < 2:  # the second request is in flight
                time.sleep(0.01)
            cancelled_at.append(time.monotonic())
            cancel.set()

        threading.Thread(target=cancel_when_second_request_arrives, daemon=True).start()
        res = run(settings(server), cancel=cancel)
        returned_at = time.monotonic()
    assert res.cancelled and res.speedup == pytest.approx(2.0)
    assert returned_at - cancelled_at[0] < 2.0  # the 30 s request was abandoned


def test_an_unreachable_endpoint_ends_the_run_with_one_reason() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run(LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", model="m", samples=1, timeout_s=2))
    assert res.stop.kind is StopKind.PROPOSER_FAILED and res.stop.detail.startswith(
        f"cannot reach http://127.0.0.1:{port}/v1"
    )
    assert res.attempts == 0 and res.outcome is RunOutcome.NOT_IMPROVED


def test_a_refused_key_ends_the_run() -> None:
    with ScriptedLLM([Fail(401, "invalid api key")]) as server:
        res = run(settings(server))
    assert res.stop == Stop(StopKind.PROPOSER_FAILED, f"{server.url} refused the API key (401)")


def test_key_from_a_file_is_sent_and_never_logged(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("file-key-77a1\n")
    caplog.set_level(logging.DEBUG)
    with ScriptedLLM([Garbage("{}"), Garbage("[]")]) as server:
        run(settings(server, api_key_file=str(key_file)))
    assert {r.authorization for r in server.requests} == {"Bearer file-key-77a1"}
    assert "file-key-77a1" not in caplog.text
    assert "file-key-77a1" not in repr(settings(server, api_key_file=str(key_file)))


def test_parallel_samples_are_separate_conversations_with_their_own_seeds() -> None:
    def script(body: dict[str, Any], i: int):
        if len(body["messages"]) > 2:
            return Say("done")
        return Call((("verify_and_time", {"code": variant(T, f"speedup=1.{body['seed'] % 7 + 2}")}),))

    with ScriptedLLM(script) as server:
        res = run(settings(server, samples=3))
    first_round = [r.body for r in server.requests if len(r.body["messages"]) == 2]
    assert len(first_round) == 3 and len({b["seed"] for b in first_round}) == 3
    assert res.attempts == 3 and res.outcome is RunOutcome.IMPROVED


def test_the_compile_tool_uses_the_sandbox_compile_pool() -> None:
    broken = variant(T, "x", "y[i] = undefined_name; ")
    script = [
        Call((("compile", {"code": broken}),)),
        Call((("compile", {"code": variant(T, "ok")}),)),
        Say("done"),
    ]
    with ScriptedLLM(script) as server:
        run(settings(server), compiler=CompilePool(workers=1))  # closed with the proposer
    assert "compile" in {t["function"]["name"] for t in server.requests[0].body["tools"]}
    failed, ok = last(server, 1)["content"], last(server, 2)["content"]
    assert failed.startswith("Compilation failed") and "undefined_name" in failed
    assert ok.startswith("Compiled.") and "registers" in ok


def test_extract_code_takes_the_last_kernel_block() -> None:
    reply = "```cuda\n__device__ int f();\n```\ntext\n```cpp\n__global__ void k() {}\n```\n```\nnot code\n```"
    assert extract_code(reply) == "__global__ void k() {}\n"
    assert extract_code("no code") is None


def test_the_in_process_vllm_backend_batches_conversations(monkeypatch: pytest.MonkeyPatch) -> None:
    """``backend="vllm"`` through a stand-in ``vllm`` module: one LLM.chat call per round, fenced code."""
    import types

    calls: list[tuple[list[Any], list[Any]]] = []

    class SamplingParams:
        def __init__(self, **kw: Any) -> None:
            self.kw = kw

    class LLM:
        def __init__(self, model: str) -> None:
            self.model = model

        def chat(self, conversations: list[Any], params: list[Any], use_tqdm: bool) -> list[Any]:
            calls.append((conversations, params))
            code = variant(T, f"speedup={1.5 + len(calls)}")
            gen = types.SimpleNamespace(text=f"```cuda\n{code}```", token_ids=[0] * 50, finish_reason="stop")
            return [types.SimpleNamespace(prompt_token_ids=[0] * 100, outputs=[gen]) for _ in conversations]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    s = LLMSettings(model="local-coder", backend="vllm", samples=2, max_turns=2, temperature=0.2)
    res = run(s)
    assert len(calls) == 2 and all(len(conv) == 2 for conv, _ in calls)  # two rounds, two conversations each
    assert {p.kw["temperature"] for _, ps in calls for p in ps} == {0.2}
    assert len({p.kw["seed"] for p in calls[0][1]}) == 2
    assert "```cuda" in calls[0][0][0][0]["content"]  # the fenced-code instructions
    assert "Speedup 2.500x" in calls[1][0][0][-1]["content"]  # the verdict came back as a message
    assert res.attempts == 4 and res.speedup == pytest.approx(3.5) and res.tokens == 4 * 150


def test_more_tool_calls_than_the_batch_holds_are_all_evaluated_and_answered() -> None:
    calls = tuple(("verify_and_time", {"code": variant(T, f"speedup=1.{i + 2}")}) for i in range(3))
    with ScriptedLLM([Call(calls), Say("done")]) as server:
        proposer = LLMProposer(settings(server))
        res = optimize(T, proposer, MarkerExecutor(), settings=LoopSettings(batch_size=2))
        proposer.close()
    assert res.attempts == 3 and res.speedup == pytest.approx(1.4)
    answers = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["call_0", "call_1", "call_2"]
    assert all("Candidate b" in m["content"] for m in answers)


def test_dynamic_shared_memory_travels_through_tools_and_fenced_replies() -> None:
    """A block-per-row style rewrite needs dynamic shared memory: the tool schema and the fenced
    format both carry `smem`, and the resolved launches reach the executor with it."""
    tool_script = [
        Call(
            (
                (
                    "verify_and_time",
                    {"code": variant(T, "speedup=1.5"), "block": "128", "smem": "(block / 32) * 4"},
                ),
            )
        ),
        Say("done"),
    ]
    with ScriptedLLM(tool_script) as server:
        res = run(settings(server))
    schema = {t["function"]["name"]: t for t in server.requests[0].body["tools"]}
    assert "smem" in schema["verify_and_time"]["function"]["parameters"]["properties"]
    assert res.best is not None
    assert res.best.proposal.launch == LaunchChange(block="128", shared="(block / 32) * 4")

    fenced = [
        Say(
            f"Shared partials.\nlaunch: block=256 smem=(block / 32) * 4\n```cuda\n{variant(T, 'speedup=1.7')}```"
        )
    ]
    refusal = '"auto" tool choice requires --enable-auto-tool-choice'
    executor = MarkerExecutor()

    def script(body: dict[str, Any], i: int):
        return Fail(400, refusal) if "tools" in body else fenced[0] if i == 1 else Say("done")

    with ScriptedLLM(script) as server:
        proposer = LLMProposer(settings(server, max_turns=2))
        try:
            res = optimize(T, proposer, executor, budget=OptimizeBudget(wall_s=30))
        finally:
            proposer.close()
    assert res.best is not None and res.best.proposal.launch == LaunchChange(
        block="256", shared="(block / 32) * 4"
    )
    launched = [r.candidates[0].launches for r in executor.requests if r.candidates]
    assert launched and launched[0] is not None and {lc.shared_bytes for lc in launched[0]} == {32}


def test_a_fenced_launch_line_that_does_not_parse_is_answered_not_run() -> None:
    replies = [Say(f"launch: threads=64\n```cuda\n{variant(T, 'speedup=3')}```"), Say("done")]
    refusal = '"auto" tool choice requires --enable-auto-tool-choice'

    def script(body: dict[str, Any], i: int):
        return Fail(400, refusal) if "tools" in body else replies[min(i - 1, 1)]

    with ScriptedLLM(script) as server:
        res = run(settings(server, max_turns=2))
    assert res.attempts == 0
    assert "Error in the launch line: unknown key `threads`" in last(server, 2)["content"]


def test_a_rewrite_with_another_parameter_list_is_refused_before_it_runs() -> None:
    changed = variant(T, "speedup=4").replace("int n,", "long n,", 1)
    assert changed != variant(T, "speedup=4")
    with ScriptedLLM([Call((("verify_and_time", {"code": changed}),)), Say("done")]) as server:
        res = run(settings(server))
    assert res.attempts == 1 and res.history[0].result.status.value == "launch_error"
    assert "parameter list differs" in res.history[0].result.message
    assert "parameter list differs" in last(server, 1)["content"]


def test_the_profile_tool_asks_the_sandbox_for_nsight_compute_and_says_when_it_is_missing() -> None:
    """`profile` re-evaluates the candidate with `EvalOptions.profile`; without ncu on the GPU
    machine (here the simulated GPU) the answer says so next to the numbers it has."""
    executor = FakeExecutor()
    script = [
        Call((("verify_and_time", {"code": variant(T, "speedup=1.8")}),)),
        Call((("profile", {"candidate": "b0-c0"}),)),
        Say("done"),
    ]
    with ScriptedLLM(script) as server:
        proposer = LLMProposer(settings(server))
        try:
            res = optimize(T, proposer, executor, budget=OptimizeBudget(wall_s=30))
        finally:
            proposer.close()
    assert res.best is not None
    profiled = [r for r in executor.requests if r.options.profile]
    assert len(profiled) == 1 and not profiled[0].options.time
    assert profiled[0].candidates[0].kernel.source == T.unit_with(variant(T, "speedup=1.8"))
    answer = last(server, 2)["content"]
    assert "Candidate b0-c0 (ok)" in answer and "32 registers" in answer
    assert "Nsight Compute metrics not available: the simulated GPU has no Nsight Compute" in answer
    tool = {t["function"]["name"]: t for t in server.requests[0].body["tools"]}["profile"]
    assert "achieved occupancy" in tool["function"]["description"]


@pytest.mark.parametrize("fenced", [False, True])
def test_a_claimed_precision_is_refused_unless_the_spec_allows_it(fenced: bool) -> None:
    code = variant(T, "speedup=2")
    refusal = '"auto" tool choice requires --enable-auto-tool-choice'
    reply: Any = (
        Say(f"Half the bytes.\nprecision: fp16\n```cuda\n{code}```")
        if fenced
        else Call((("verify_and_time", {"code": code, "precision": ["fp16"]}),))
    )

    def script(body: dict[str, Any], i: int):
        if fenced and "tools" in body:
            return Fail(400, refusal)
        return reply if i == int(fenced) else Say("done")

    for target, allowed in ((T, False), (replace(T, allow_precision=("fp16",)), True)):
        executor = MarkerExecutor()
        with ScriptedLLM(script) as server:
            proposer = LLMProposer(settings(server, max_turns=2))
            try:
                res = optimize(target, proposer, executor, budget=OptimizeBudget(wall_s=30))
            finally:
                proposer.close()
        (attempt,) = res.history
        assert attempt.proposal.precision == ("fp16",)
        if allowed:
            assert attempt.result.status.value == "ok"
            assert executor.requests[-1].allow_precision == ("fp16",)
        else:
            assert attempt.result.status.value == "launch_error"
            assert "claims fp16, which the spec of saxpy does not allow" in attempt.result.message
            assert len(executor.requests) == 1  # the baseline only: nothing of the candidate ran
