"""The optimize loop against a marker-driven executor: best-so-far, diffs, launch changes, budgets,
overlap, determinism, cancellation, failures, trajectories."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence

import pytest
from loop_fakes import DATA, MarkerExecutor, ScriptedProposer, saxpy_target, variant
from polling import set_when

from agent.loop import LoopEvent, LoopSettings, RunOutcome, Stop, StopKind, optimize
from agent.proposal import Attempt, Proposal
from agent.proposer import BudgetError, OptimizeBudget, parse_budget
from agent.target import TargetError, target_for
from agent.trajectory import (
    REWARD_VERSION,
    SCHEMA,
    RunInfo,
    TrajectoryLine,
    TrajectoryLog,
    read_trajectories,
    reward,
    trajectory_line,
)
from cudasrc.launch import LaunchChange
from cudasrc.source import Document
from sandbox.contract import CandidateResult, Status, Timing, from_json, to_json
from sandbox.executor import NoGpuError

T = saxpy_target()


def proposals(*markers: str) -> list[Proposal]:
    return [Proposal(variant(T, m, f"/*{i}*/ "), f"variant {m}") for i, m in enumerate(markers)]


def once(*markers: str):
    """A plan proposing ``markers`` in the first call, then nothing."""
    return lambda call, history, n: proposals(*markers) if call == 0 else []


def test_keeps_the_fastest_verified_candidate_and_reports_a_diff() -> None:
    plan = once("speedup=1.5", "mismatch", "compile_error", "speedup=3.0", "speedup=2.0")
    res = optimize(T, ScriptedProposer(plan), MarkerExecutor(), budget=OptimizeBudget(wall_s=30))
    assert res.outcome is RunOutcome.IMPROVED
    assert res.stop == Stop(StopKind.PROPOSER_EXHAUSTED)
    assert res.attempts == 5
    assert res.best is not None and "speedup=3.0" in res.best.proposal.code
    assert res.speedup == pytest.approx(3.0)
    assert res.speedup_low < res.speedup < res.speedup_high
    assert res.rewritten == T.file_with(res.best.proposal.code)
    assert res.diff.startswith(f"--- {T.path}\n+++ {T.path}\n")  # absolute: no a/ b/ prefixes
    assert res.rewritten.count("\n") == T.text.count("\n") + 1  # one added line, no stray blank line
    assert "+    /*3*/ // speedup=3.0" in res.diff
    assert [(c.label, c.seeds, c.ok) for c in res.verification] == [
        ("n=1000", 3, True),
        ("n=4097", 3, True),
        ("n=16777216", 3, True),
    ]


def test_nothing_faster_is_not_improved_and_changes_nothing() -> None:
    res = optimize(T, ScriptedProposer(once("speedup=1.0", "mismatch")), MarkerExecutor())
    assert res.outcome is RunOutcome.NOT_IMPROVED
    assert res.best is not None and res.best.result.status is Status.OK  # verified, not faster
    assert res.diff == "" and res.rewritten == ""


def test_a_launch_change_is_resolved_from_the_spec_and_edits_the_launch_site() -> None:
    change = LaunchChange(block="256")

    def plan(call, h, n):
        return (
            [Proposal(variant(T, "speedup=2.5"), "block 256", ("n fits in int",), change)]
            if call == 0
            else []
        )

    ex = MarkerExecutor()
    res = optimize(T, ScriptedProposer(plan), ex)
    cand = ex.requests[1].candidates[0]
    assert cand.launches is not None
    assert [launch.block[0] for launch in cand.launches] == [256, 256, 256]
    assert [launch.grid[0] for launch in cand.launches] == [4, 17, (1 << 24) // 256]
    assert res.launch == change
    assert res.assumptions == ("n fits in int",)
    assert len(res.launch_edits) == 3 and res.launch_sites == 1 and res.launch_todo == ""
    assert "saxpy<<<(n + (256 - 1)) / 256, 256>>>(n, 2.0f, x, y);" in res.rewritten
    assert "-    saxpy<<<(n + 31) / 32, 32>>>(n, 2.0f, x, y);" in res.diff
    # the spec follows: the next run measures the launch the code now uses
    assert "+// @cuda-agent launch grid=cdiv(n, block) block=256\n" in res.diff
    again = target_for(Document(res.rewritten, T.path))
    assert again.bench_problem.launch.block[0] == 256


VADD = """// @cuda-agent sizes n=1<<20 verify n=1000
// @cuda-agent launch grid=cdiv(n, block) block=32
// @cuda-agent arg a in float[n]
// @cuda-agent arg c out float[n]
// @cuda-agent arg n = n
__global__ void vadd(const float* a, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i];
}
"""

MAIN = """
int main() {
    const int n = 1 << 20;
    const int threads = 32;  // threads per block
    int blocks = (n + threads - 1) / threads;
    vadd<<<blocks, threads>>>(a, c, n);
    const int other = 64;
    vadd<<<(n + other - 1) / other, other>>>(a, c, n);
    use(other);
}
"""


def test_launch_rewrite_updates_the_spec_and_drops_declarations_only_it_used() -> None:
    t = target_for(Document(VADD + MAIN, "vadd.cu"))
    assert t.site_edits is not None
    le = t.site_edits(LaunchChange(grid="cdiv(n, block * 4)", block="256"))
    out = t.file_with(t.definition, le.edits)
    assert le.sites == 2 and le.todo == ""
    assert "// @cuda-agent launch grid=cdiv(n, block * 4) block=256\n" in out
    assert "vadd<<<(n + (256 * 4 - 1)) / (256 * 4), 256>>>(a, c, n);" in out
    # `blocks` was used only by the first launch, and `threads` only by it and `blocks`;
    # `other` is still used
    assert "threads" not in out and "blocks" not in out
    assert "const int other = 64;" in out


def test_without_a_launch_site_the_result_says_which_launch_to_use() -> None:
    t = target_for(Document(VADD, "vadd.cu"))
    assert t.site_edits is not None
    le = t.site_edits(LaunchChange(block="128"))
    assert le.sites == 0
    assert le.todo == "no launch site of vadd in this file: launch it with grid=cdiv(n, block) block=128"
    assert "// @cuda-agent launch grid=cdiv(n, block) block=128\n" in t.file_with(t.definition, le.edits)


def test_a_bad_launch_is_a_verdict_and_never_reaches_the_executor() -> None:
    def plan(call, h, n):
        return (
            [Proposal(variant(T, "speedup=9"), "too big", launch=LaunchChange(block="2048"))]
            if call == 0
            else []
        )

    ex = MarkerExecutor()
    res = optimize(T, ScriptedProposer(plan), ex)
    assert len(ex.requests) == 1  # the baseline only
    assert res.outcome is RunOutcome.NOT_IMPROVED and res.best is None
    p = ScriptedProposer(plan)
    optimize(T, p, MarkerExecutor())
    assert p.observed == [["b0-c0"]]


def test_proposing_overlaps_evaluating_and_the_proposer_sees_results_two_batches_back() -> None:
    def plan(call: int, history: Sequence[Attempt], n: int) -> list[Proposal]:
        return (
            [Proposal(variant(T, f"delay=0.2 speedup={1 + call / 10}"), f"call {call}")] if call < 4 else []
        )

    p = ScriptedProposer(plan)
    ex = MarkerExecutor()
    res = optimize(T, p, ex, settings=LoopSettings(batch_size=1, lookahead=1))
    assert res.attempts == 4
    # call k sees batches < k-1 (one attempt each); after an empty answer it waits for one more batch
    assert p.seen == [0, 0, 1, 2, 3, 4]
    _, batch0_end, _ = ex.evaluated[1]
    assert p.propose_times[1] < batch0_end  # batch 1 was proposed before batch 0's verdicts


def test_runs_are_reproducible_with_a_seed() -> None:
    def plan(call: int, history: Sequence[Attempt], n: int) -> list[Proposal]:
        if call >= 3:
            return []
        best = max((a.result.speedup for a in history), default=1.0)
        return [Proposal(variant(T, f"speedup={best + 0.5 + i}", f"/*{call}.{i}*/ "), "v") for i in range(2)]

    def run(seed: int) -> tuple[list[tuple[str, str, float | None]], tuple[int, ...]]:
        ex = MarkerExecutor()
        res = optimize(T, ScriptedProposer(plan), ex, seed=seed, settings=LoopSettings(batch_size=2))
        assert res.best is not None
        return [
            (r.id, r.candidates[0].kernel.source[-40:], res.speedup) for r in ex.requests[1:]
        ], ex.requests[0].seeds

    a, seeds_a = run(7)
    b, seeds_b = run(7)
    _, seeds_c = run(8)
    assert [x[1:] for x in a] == [x[1:] for x in b]
    assert seeds_a == seeds_b != seeds_c
    assert len(set(seeds_a)) == 3


def test_candidate_budget_is_exact() -> None:
    def endless(call, h, n):
        return [Proposal(variant(T, f"speedup=1.{call}{i}"), "v") for i in range(n)]

    res = optimize(
        T,
        ScriptedProposer(endless),
        MarkerExecutor(),
        budget=OptimizeBudget(candidates=5),
        settings=LoopSettings(batch_size=2),
    )
    assert res.attempts == 5
    assert res.stop == Stop(StopKind.CANDIDATES)


def test_wall_time_budget_stops_a_slow_run_and_keeps_the_best() -> None:
    def endless(call, h, n):
        return [Proposal(variant(T, f"delay=0.15 speedup=1.{call + 1}"), "v")]

    t0 = time.monotonic()
    res = optimize(
        T,
        ScriptedProposer(endless),
        MarkerExecutor(),
        budget=OptimizeBudget(wall_s=0.6),
        settings=LoopSettings(batch_size=1),
    )
    assert time.monotonic() - t0 < 3.0
    assert res.stop == Stop(StopKind.WALL_TIME)
    assert res.best is not None and res.outcome is RunOutcome.IMPROVED


def test_the_wall_time_budget_starts_once_the_original_is_measured() -> None:
    """An original whose measurement (verification and timing at the benchmark size) takes longer
    than the whole budget still gets its first batch evaluated; its time is reported apart."""
    plan = once("delay=0.3 speedup=4.0")
    events: list[str] = []
    res = optimize(
        T,
        ScriptedProposer(plan),
        MarkerExecutor(baseline_s=1.0),
        budget=OptimizeBudget(wall_s=0.6),
        on_event=lambda e: events.append(e.message) if e.kind == "baseline" else None,
    )
    assert res.outcome is RunOutcome.IMPROVED and res.speedup == pytest.approx(4.0)
    assert res.stop == Stop(StopKind.PROPOSER_EXHAUSTED)
    assert 1.0 <= res.baseline_seconds < res.seconds
    assert events == [f"baseline ok (1 ms, measured in {res.baseline_seconds:.1f} s)"]


def test_token_budget() -> None:
    def endless(call, h, n):
        return [Proposal(variant(T, f"speedup=1.{call + 1}"), "v")]

    p = ScriptedProposer(endless, tokens_per_call=400)
    res = optimize(
        T,
        p,
        MarkerExecutor(),
        budget=OptimizeBudget(wall_s=None, tokens=1000),
        settings=LoopSettings(batch_size=1),
    )
    assert res.stop == Stop(StopKind.TOKENS)
    assert res.tokens == 1200 and res.attempts == 3  # the batch that crossed the budget is still evaluated


def test_cancellation_mid_batch_returns_promptly_with_the_best_so_far() -> None:
    cancel = threading.Event()

    def plan(call: int, history: Sequence[Attempt], n: int) -> list[Proposal]:
        return (
            proposals("speedup=2.0")
            if call == 0
            else [Proposal(variant(T, f"delay=30 speedup=5.{call}"), "slow")]
        )

    events: list[LoopEvent] = []
    executor = MarkerExecutor()

    def slow_one_running() -> bool:
        return any("delay=30" in c.kernel.source for r in executor.requests for c in r.candidates)

    def on_event(e: LoopEvent) -> None:
        events.append(e)
        if e.kind == "evaluating" and "batch 1" in e.message:
            set_when(slow_one_running, cancel)  # mid batch: the executor has the slow candidate

    t0 = time.monotonic()
    res = optimize(
        T,
        ScriptedProposer(plan),
        executor,
        cancel=cancel,
        on_event=on_event,
        settings=LoopSettings(batch_size=1),
    )
    assert time.monotonic() - t0 < 3.0
    assert res.cancelled and res.stop == Stop(StopKind.CANCELLED)
    assert res.outcome is RunOutcome.IMPROVED and res.speedup == pytest.approx(2.0)
    assert events[-1].kind == "finished" and events[-1].fraction == 1.0


def test_cancelled_before_start_still_returns_the_baseline() -> None:
    cancel = threading.Event()
    cancel.set()
    res = optimize(T, ScriptedProposer(once("speedup=2")), MarkerExecutor(), cancel=cancel)
    assert res.cancelled and res.attempts == 0 and res.baseline.status is Status.OK


def test_identical_proposals_are_evaluated_once() -> None:
    same = Proposal(variant(T, "speedup=2.0"), "same")

    def plan(call, h, n):
        return [same, same] if call < 2 else []

    ex = MarkerExecutor()
    res = optimize(T, ScriptedProposer(plan), ex, settings=LoopSettings(batch_size=2))
    assert sum(len(r.candidates) for r in ex.requests if not r.options.sanitize) == 1
    assert res.attempts == 4
    assert [a for a in res.verification if not a.ok] == []


def test_a_broken_baseline_stops_before_proposing() -> None:
    p = ScriptedProposer(once("speedup=2"))
    res = optimize(T, p, MarkerExecutor(baseline=Status.CRASH))
    assert res.outcome is RunOutcome.BASELINE_FAILED and p.calls == 0
    assert res.stop.kind is StopKind.BASELINE_FAILED and res.stop.detail.startswith("crash")


def test_no_gpu_is_an_exception_for_the_caller() -> None:
    with pytest.raises(NoGpuError):
        optimize(T, ScriptedProposer(once("speedup=2")), MarkerExecutor(no_gpu=True))


def test_a_failing_proposer_ends_the_run_keeping_the_best() -> None:
    def plan(call: int, history: Sequence[Attempt], n: int) -> list[Proposal]:
        if call == 0:
            return proposals("speedup=2.0")
        raise RuntimeError("model went away")

    res = optimize(T, ScriptedProposer(plan), MarkerExecutor(), settings=LoopSettings(batch_size=1))
    assert res.stop == Stop(StopKind.PROPOSER_FAILED, "model went away")
    assert res.outcome is RunOutcome.IMPROVED


def test_an_executor_failure_mid_run_keeps_the_best() -> None:
    def plan(call, h, n):
        return proposals("speedup=2.0") if call == 0 else proposals("die") if call == 1 else []

    res = optimize(T, ScriptedProposer(plan), MarkerExecutor(), settings=LoopSettings(batch_size=1))
    assert res.stop.kind is StopKind.EXECUTOR_FAILED and res.stop.detail.startswith("worker died")
    assert res.speedup == pytest.approx(2.0)


def test_a_stop_reads_as_one_line_and_says_whether_something_failed() -> None:
    assert str(Stop(StopKind.PROPOSER_EXHAUSTED)) == "proposer exhausted"
    assert str(Stop(StopKind.WALL_TIME)) == "budget: wall time"
    assert str(Stop(StopKind.EXECUTOR_FAILED, "worker died")) == "executor failed: worker died"
    assert str(Stop(StopKind.BASELINE_FAILED, "crash: boom")) == "baseline crash: boom"
    assert [k for k in StopKind if Stop(k).failed] == [StopKind.PROPOSER_FAILED, StopKind.EXECUTOR_FAILED]


def test_trajectory_has_one_line_per_attempt_with_rewards(tmp_path) -> None:
    log = TrajectoryLog(tmp_path / "runs" / "t.jsonl")
    res = optimize(
        T, ScriptedProposer(once("speedup=2.0", "mismatch", "speedup=1.0")), MarkerExecutor(), trajectory=log
    )
    lines = [json.loads(x) for x in (tmp_path / "runs" / "t.jsonl").read_text().splitlines()]
    assert len(lines) == res.attempts == 3
    assert {x["schema"] for x in lines} == {SCHEMA}
    assert [x["result"]["status"] for x in lines] == ["ok", "mismatch", "ok"]
    assert lines[1]["reward"] == -1.0
    assert lines[0]["reward"] > 3.0 > 1.0 >= lines[2]["reward"] >= 0.5  # same speed: correct
    assert lines[0]["original"] == T.definition and lines[0]["kernel"] == "saxpy"
    assert lines[0]["proposal"]["code"].endswith("// speedup=2.0\n}\n")


def test_a_trajectory_line_round_trips_through_the_contract_converter(tmp_path) -> None:
    log = TrajectoryLog(tmp_path / "t.jsonl")
    proposal = Proposal(
        "__global__ void saxpy() {}",
        "launch change",
        assumptions=("a and c never alias",),
        launch=LaunchChange(grid="cdiv(n, block*4)"),
        transcript=(("user", "make it fast"), ("assistant", "done")),
    )
    run = RunInfo("r1", "k.cu", "saxpy", "llm:m", 7, "H200", "orig", "// spec", 0.5, task="t@1")
    attempt = Attempt(3, 1, "b1-c0", proposal, _ok(2.0), 2.5, duplicate_of="b0-c1")
    line = trajectory_line(run, attempt, retracts="b0-c0")
    assert from_json(TrajectoryLine, to_json(line)) == line
    log.record(run, attempt)
    with (tmp_path / "t.jsonl").open("a") as f:
        f.write('not json\n{"schema": "other"}\n')
    [back] = read_trajectories(tmp_path / "t.jsonl")  # the malformed lines are skipped
    assert back.proposal.launch == LaunchChange(grid="cdiv(n, block*4)") and back.task == "t@1"
    assert [(x.role, x.content) for x in back.proposal.transcript] == list(proposal.transcript)
    assert back.result == attempt.result and back.reward == 2.5 and back.retracts == ""
    raw = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert raw["proposal"]["transcript"][0] == {"role": "user", "content": "make it fast"}


def _ok(speedup: float, spread: float = 0.01) -> CandidateResult:
    t = Timing(1 / speedup, (1 - spread) / speedup, (1 + spread) / speedup, 0.9 / speedup, 20, 2 * spread)
    return CandidateResult(
        "c",
        Status.OK,
        timing=t,
        speedup=speedup,
        speedup_low=speedup * (1 - 2 * spread),
        speedup_high=speedup * (1 + 2 * spread),
    )


def test_reward_milestones_order_wrong_correct_faster_much_faster() -> None:
    wrong = [
        reward(CandidateResult("c", s))
        for s in (Status.COMPILE_ERROR, Status.MISMATCH, Status.REJECTED, Status.CRASH)
    ]
    slower, same, faster, much, huge = (reward(_ok(s)) for s in (0.5, 1.0, 1.2, 1.6, 8.0))
    assert max(wrong) < min(slower, same) and max(slower, same) < faster < much < huge
    assert reward(_ok(1.01, spread=0.05)) < 2.0  # within the noise: only "correct"
    assert huge == 4.0  # the shaping term is bounded


@pytest.mark.parametrize(
    "text, expected",
    [
        ("60s", OptimizeBudget(60.0, None, None)),
        ("5m,40c", OptimizeBudget(300.0, 40, None)),
        ("200k, 2h", OptimizeBudget(7200.0, None, 200_000)),
        ("1M", OptimizeBudget(None, None, 1_000_000)),
        ("90", OptimizeBudget(90.0, None, None)),
    ],
)
def test_parse_budget(text: str, expected: OptimizeBudget) -> None:
    assert parse_budget(text) == expected


@pytest.mark.parametrize("text", ["", "ten", "5x", "0s", "-3c"])
def test_parse_budget_rejects(text: str) -> None:
    with pytest.raises(BudgetError):
        parse_budget(text)


def test_target_errors_are_one_line() -> None:
    doc = Document.from_file(DATA / "vector_ops.cu")
    with pytest.raises(TargetError, match="pick one with --kernel"):
        target_for(doc)
    with pytest.raises(TargetError, match=r"no kernel 'nope'.*vadd"):
        target_for(doc, "nope")
    with pytest.raises(TargetError, match="gather has no spec"):
        target_for(doc, "gather")
    t = target_for(doc, "vadd")
    assert t.definition in t.baseline.source and t.text[t.definition_start :].startswith(
        "__global__ void vadd("
    )


def test_the_winner_runs_under_compute_sanitizer_and_a_racy_one_gives_way(tmp_path) -> None:
    log = TrajectoryLog(tmp_path / "t.jsonl")
    ex = MarkerExecutor()
    res = optimize(
        T, ScriptedProposer(once("speedup=3.0 racy", "speedup=2.0", "speedup=1.0")), ex, trajectory=log
    )
    sanitized = [r for r in ex.requests if r.options.sanitize]
    assert [len(r.candidates) for r in sanitized] == [1, 1] and not sanitized[0].options.time
    assert res.outcome is RunOutcome.IMPROVED and res.speedup == pytest.approx(2.0)
    assert res.best is not None and res.best.result.sanitizer == "memcheck: 0 errors; racecheck: 0 hazards"
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert lines[-1]["candidate_id"] == "b0-c0-sanitized" and lines[-1]["result"]["status"] == "rejected"
    assert lines[-1]["reward"] == -2.0 and res.attempts == 4  # a hack: below every honest failure
    assert lines[-1]["retracts"] == "b0-c0" and lines[-1]["reward_version"] == REWARD_VERSION
    retracted = next(x for x in read_trajectories(tmp_path / "t.jsonl") if x.candidate_id == "b0-c0")
    assert retracted.reward == -2.0 and retracted.retracted_by == "b0-c0-sanitized"


def test_sanitizing_can_be_turned_off() -> None:
    ex = MarkerExecutor()
    res = optimize(
        T, ScriptedProposer(once("speedup=3.0 racy")), ex, settings=LoopSettings(sanitize_winner=False)
    )
    assert res.speedup == pytest.approx(3.0) and not any(r.options.sanitize for r in ex.requests)
