"""KernelBench-format (PyTorch) tasks: loading and hashing, the prompt, ModelNew parsing, the
sandbox's screen, the engine's wiring on a simulated executor; the evaluation itself where torch
is installed (on the CPU), and on the GPU (``gpu`` marker)."""

from __future__ import annotations

import importlib.util
import json
import os
import textwrap
import threading
import types
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reward_fakes import MarkedExecutor

from agent.trajectory import CORRECT, FAILED, FASTER, HACK
from learning.completion import parse_torch, prompt_text, torch_cache_key
from learning.engine import Item, RewardEngine
from learning.tasks import DEFAULT_TASKS, DEFAULT_TORCH_TASKS, TaskSet, TorchTask, load_torch_file
from sandbox.contract import Budget, Status, TorchCandidate, TorchRequest, TorchResult
from sandbox.local import UNSAFE_TORCH_ENV

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (the `torch` extra)")

TASK_NAMES = ("add_mul", "gelu", "layernorm", "matmul_bias", "relu", "row_sum", "softmax_rows", "transpose")


def answer(body: str, prose: str = "Here is a faster model.") -> str:
    return f"{prose}\n```python\nimport torch\n\n\n{textwrap.dedent(body).strip()}\n```\n"


RELU_OK = """
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
"""
RELU_WRONG = """
class ModelNew(torch.nn.Module):
    def forward(self, x):  # WRONG
        return torch.abs(x)
"""
RELU_IN_PLACE = """
class ModelNew(torch.nn.Module):
    def forward(self, x):  # HACK_INPUT
        return torch.relu_(x)
"""
CACHED = """
class ModelNew(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.reference = Reference(*args)
        self.seen = {}

    def forward(self, x):  # the output of the first call on a tensor, whatever it holds later
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.seen:
            self.seen[key] = self.reference(x)
        return self.seen[key]
"""
RELU_FAST = """
class ModelNew(torch.nn.Module):
    def forward(self, x):  # FAST
        return x.clamp(min=0.0)
"""


def test_the_torch_tasks_load_with_kind_name_and_hash(tmp_path: Path) -> None:
    tasks = TaskSet.load([DEFAULT_TORCH_TASKS])
    assert sorted(t.name for t in tasks) == [f"torch.{n}" for n in TASK_NAMES]
    assert all(isinstance(t, TorchTask) and t.kind == "torch" for t in tasks)
    relu = tasks.resolve("torch.relu")
    assert tasks.resolve(relu.ref) is relu and len(relu.digest) == 12
    copy = tmp_path / "relu.py"
    copy.write_text(relu.text + "\n# edited\n")
    assert load_torch_file(copy).digest != relu.digest  # the hash follows the text
    assert load_torch_file(copy).split == relu.split  # the split follows the name only
    described = relu.describe()
    assert described["kind"] == "torch" and described["source"] == relu.text and described["task"] == relu.ref
    both = TaskSet.load([DEFAULT_TASKS, DEFAULT_TORCH_TASKS])  # beside the native tasks, no clash
    assert {"torch.softmax_rows", "softmax"} <= set(both.tasks)


def test_a_python_file_that_is_not_a_task_is_skipped_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("def get_inputs():\n    return []\n")
    (tmp_path / "broken.py").write_text("class Model(:\n")
    tasks = TaskSet.load([tmp_path])
    assert len(tasks) == 0
    assert any("no Model, get_init_inputs" in s for s in tasks.skipped)
    assert any("not Python" in s for s in tasks.skipped)


def test_the_prompt_holds_the_model_and_the_rules() -> None:
    task = load_torch_file(DEFAULT_TORCH_TASKS / "softmax_rows.py")
    text = prompt_text(task)
    assert "torch.softmax(x, dim=1)" in text and "ModelNew" in text and "TF32" in text
    assert "```python" in text


def test_model_new_comes_from_the_last_python_block_or_a_tool_call() -> None:
    two = answer(RELU_WRONG) + answer(RELU_OK, prose="Better:")
    assert "clamp_min" in parse_torch(two).source  # the last block defining ModelNew
    assert "clamp_min" in parse_torch(answer(RELU_OK) + "```python\nprint('no model')\n```\n").source
    call = {"name": "verify_and_time", "arguments": {"code": "import torch\n" + RELU_OK}}
    assert "clamp_min" in parse_torch(f"<tool_call>{__import__('json').dumps(call)}</tool_call>").source
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": answer(RELU_OK)}]
    assert "clamp_min" in parse_torch(messages).source
    for junk in (
        "no code at all",
        "```python\nclass Model(torch.nn.Module):\n    pass\n```",
        "```python\nclass ModelNew(:\n```",
    ):
        parsed = parse_torch(junk)
        assert not parsed.source and parsed.no_code.startswith("no code")


def test_the_cache_key_ignores_layout_and_comments_only() -> None:
    task = load_torch_file(DEFAULT_TORCH_TASKS / "relu.py")
    base = parse_torch(answer(RELU_OK)).source
    spaced = base.replace("return", "# a comment\n        return")
    assert torch_cache_key(task, base) == torch_cache_key(task, spaced)
    assert torch_cache_key(task, base) != torch_cache_key(task, base.replace("0.0", "1.0"))


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("import os\nclass ModelNew: pass", "import of os"),
        ("from subprocess import run\nclass ModelNew: pass", "import from subprocess"),
        ("class ModelNew:\n    x = getattr(torch, 'relu')", "use of getattr"),
        ("class ModelNew:\n    x = torch.__dict__", "attribute __dict__"),
        (
            "torch.cuda.Event.elapsed_time = lambda a, b: 0.001\nclass ModelNew: pass",
            "assignment to torch.cuda.Event",
        ),
        (
            "torch.backends.cuda.matmul.allow_tf32 = True\nclass ModelNew: pass",
            "assignment to torch.backends",
        ),
        (
            "class ModelNew:\n    def f(self):\n        self.t = torch.cuda\n        self.t.Event = None",
            "assignment to self.t.Event",
        ),
        ("class ModelNew:\n    x = __builtins__['exec']", "use of __builtins__"),
        ("a, torch.x = 1, 2\nclass ModelNew: pass", "assignment to torch.x"),
    ],
)
def test_the_screen_refuses_what_reaches_past_model_new(body: str, why: str) -> None:
    from sandbox.screen import screen

    status, message = screen("import torch\n" + body)
    assert status is Status.REJECTED and why in message


def test_the_screen_lets_an_ordinary_answer_through() -> None:
    from sandbox.screen import screen

    inline = """
    import torch
    from torch.utils.cpp_extension import load_inline

    SOURCE = "torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }"
    ext = load_inline("relu_ext", cpp_sources=SOURCE, functions=["relu"])


    class ModelNew(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = 1.0
            self.seen = {}
            self.seen[ext.relu.__init__] = 0
            a, self.b = 1, 2

        def forward(self, x):
            return ext.relu(x)
    """
    assert screen(textwrap.dedent(inline)) == (None, "")
    assert screen("class Model: pass")[0] is Status.COMPILE_ERROR
    assert screen("class ModelNew(:")[0] is Status.COMPILE_ERROR


def test_torch_answers_go_one_request_per_task_screened_first_with_rewards_in_order() -> None:
    executor = MarkedExecutor()
    tasks = TaskSet.load([DEFAULT_TORCH_TASKS])
    engine = RewardEngine(executor, tasks)
    try:
        bodies = [RELU_OK, RELU_WRONG, RELU_IN_PLACE, RELU_FAST]
        items = [Item(f"r{i}", "torch.relu", answer(b)) for i, b in enumerate(bodies)]
        items += [Item("bad", "torch.gelu", answer("import os\nclass ModelNew(torch.nn.Module):\n    pass"))]
        items += [Item("none", "torch.gelu", "I would rather not.")]
        items += [Item("dup", "torch.relu", answer(RELU_OK.replace("return", "# same\n        return")))]
        scored = engine.score(items)
    finally:
        engine.close()
    assert [s.key for s in scored] == [i.key for i in items]
    # one request per task with candidates, no CUDA request; the duplicate, the prose and the
    # screened-out answer (gelu's only one) never reach the sandbox
    assert len(executor.torch_requests) == 1 and not executor.requests
    assert sum(len(r.candidates) for r in executor.torch_requests) == 4
    by = {s.key: s for s in scored}
    assert by["r0"].milestone == "correct" and by["r0"].reward <= CORRECT
    assert by["r0"].compiled_speedup == pytest.approx(0.7)
    assert by["r1"].reward == FAILED and by["r1"].verdict == "mismatch"
    assert by["r2"].reward == HACK and by["r2"].verdict == "rejected"
    assert (
        by["r3"].reward is not None
        and by["r3"].reward >= FASTER
        and by["r3"].compiled_speedup == pytest.approx(1.5)
    )
    assert by["bad"].reward == HACK and "import of os" in by["bad"].message
    assert by["none"].verdict == "no_code" and by["none"].reward == FAILED
    assert by["dup"].reward == by["r0"].reward
    assert all(s.task.startswith("torch.") and "@" in s.task for s in scored)


class AheadExecutor(MarkedExecutor):
    """Records what it was asked, in order: builds ahead (the sources) and evaluations."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, Any]] = []

    def build_ahead(self, sources: Sequence[str]) -> None:
        with self.lock:
            self.asked.append(("build", sorted(sources)))

    def evaluate_torch(self, request: TorchRequest, *, cancel: threading.Event | None = None) -> TorchResult:
        with self.lock:
            self.asked.append(("evaluate", len(request.candidates)))
        return super().evaluate_torch(request, cancel=cancel)


def test_every_answers_build_starts_when_its_batch_arrives_and_its_phases_reach_the_row() -> None:
    """One evaluation thread, two tasks: the second task's answers are built ahead while the
    first task's are evaluated, not when the thread comes to them; a duplicate or a screened-out
    answer is not built; the sandbox's per-phase seconds come back on each row."""
    executor = AheadExecutor()
    engine = RewardEngine(executor, TaskSet.load([DEFAULT_TORCH_TASKS]), workers=1)
    gelu = answer("class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x  # gelu")
    items = [Item("r0", "torch.relu", answer(RELU_OK)), Item("r1", "torch.relu", answer(RELU_FAST))]
    items += [Item("g0", "torch.gelu", gelu), Item("dup", "torch.relu", answer(RELU_OK))]
    items += [Item("bad", "torch.gelu", answer("import os\nclass ModelNew(torch.nn.Module):\n    pass"))]
    try:
        scored = engine.score(items)
    finally:
        engine.close()
    ((what, sources), *rest) = executor.asked
    assert (
        what == "build" and len(sources) == 3 and sorted(what for what, _ in rest) == ["evaluate", "evaluate"]
    )
    assert sources == sorted(parse_torch(i.completion).source for i in items[:3])
    assert [s.phases for s in scored if s.verdict == "ok"] == [{"time_s": 1.5}] * 4


def test_the_worker_takes_the_devices_ceilings_from_the_executor_and_measures_only_what_they_miss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The physics floor's ceilings are the executor's, measured once per device (fp32 at the
    pinned precision, half types on the tensor cores): no answer's worker measures them again,
    unless the task computes in a type they do not cover or the device has none."""
    import sandbox.torch_eval as torch_eval
    from sandbox.contract import DeviceInfo

    class Dtype:
        def __init__(self, floating: bool) -> None:
            self.is_floating_point = floating

    f32, f16, bf16, f64, i64 = Dtype(True), Dtype(True), Dtype(True), Dtype(True), Dtype(False)
    fake = types.SimpleNamespace(
        float32=f32, float16=f16, bfloat16=bf16, cuda=types.SimpleNamespace(OutOfMemoryError=MemoryError)
    )
    measured: list[set[Any]] = []

    def ceilings(torch: Any, device: Any, clock: Any, dtypes: set[Any]) -> tuple[float, float]:
        measured.append(set(dtypes))
        return 1.0, 2.0

    monkeypatch.setattr(torch_eval, "ceilings", ceilings)
    handler = object.__new__(torch_eval.TorchHandler)
    handler.torch, handler.device = fake, "cuda:0"
    clock: Any = None  # the fallback's, never read here
    known = DeviceInfo("H100", "9.0", 132, 50 << 20, 80 << 30, "", 3000.0, 50_000.0, 700_000.0)
    assert handler._ceilings(clock, {f32, i64}, known) == (3000.0, 50_000.0)
    assert handler._ceilings(clock, {f16, f32}, known) == (3000.0, 700_000.0)
    assert handler._ceilings(clock, {bf16}, known) == (3000.0, 700_000.0)
    assert measured == []
    assert handler._ceilings(clock, {f64}, known) == (1.0, 2.0)  # not covered: measured beside the task
    assert handler._ceilings(clock, {f32}, None) == (1.0, 2.0)
    assert handler._ceilings(clock, {f16}, replace(known, peak_tensor_gflops=0.0)) == (1.0, 2.0)
    assert measured == [{f64}, {f32}, {f16}]


def test_a_torch_task_whose_own_model_fails_gives_null_rewards() -> None:
    executor = MarkedExecutor()
    executor.task_error = "the task's model failed: RuntimeError: out of memory"
    engine = RewardEngine(executor, TaskSet.load([DEFAULT_TORCH_TASKS]))
    try:
        (scored,) = engine.score([Item("a", "torch.relu", answer(RELU_OK))])
    finally:
        engine.close()
    assert scored.reward is None and "own model failed" in scored.reason


# --------------------------------------------------------------------------- the evaluation itself

TINY_TASK = """
import torch


class Model(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = torch.nn.Linear(features, features)

    def forward(self, x):
        return torch.softmax(self.linear(x), dim=1)


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return [32]


def get_verify_inputs():
    return [[torch.randn(5, 32)]]
"""
TINY_OK = """
class ModelNew(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = torch.nn.Linear(features, features)

    def forward(self, x):
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return torch.exp(y - y.amax(dim=1, keepdim=True)) / torch.exp(y - y.amax(dim=1, keepdim=True)).sum(dim=1, keepdim=True)
"""
TINY_WRONG = TINY_OK.replace("amax(dim=1", "amin(dim=0").replace("sum(dim=1", "sum(dim=0")
TINY_IN_PLACE = """
class ModelNew(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = torch.nn.Linear(features, features)

    def forward(self, x):
        return torch.softmax(self.linear(x.mul_(2.0)), dim=1)
"""
TINY_CACHED = TINY_TASK.replace("class Model(", "class Reference(") + CACHED
TINY_RAISES = """
class ModelNew(torch.nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x):
        raise RuntimeError("not written yet")
"""


def _tiny_request(time: bool) -> TorchRequest:
    bodies = {
        "ok": TINY_OK,
        "wrong": TINY_WRONG,
        "in_place": TINY_IN_PLACE,
        "raises": TINY_RAISES,
        "cached": TINY_CACHED,
    }
    cands = tuple(TorchCandidate(k, "import torch\n" + textwrap.dedent(b)) for k, b in bodies.items())
    budget = Budget(min_samples=5, max_samples=20, time_budget_ms=50)
    return TorchRequest("tiny", TINY_TASK, cands, seeds=(1, 2), budget=budget, time=time, compiled=False)


@needs_torch
def test_the_evaluation_on_the_cpu_gives_each_answer_its_verdict() -> None:
    from sandbox.torch_eval import TorchHandler
    from sandbox.wire import TorchJob

    handler = TorchHandler(0, "cpu")
    request = _tiny_request(time=True)
    got = {c.id: handler.evaluate(TorchJob(request, i)) for i, c in enumerate(request.candidates)}
    ok = got["ok"].result
    assert ok.status is Status.OK, ok.message
    assert len(ok.checks) == 5 and all(c.ok for c in ok.checks)  # (bench + verify size) x 2 seeds, swapped
    assert ok.pairs > 0 and ok.speedup > 0 and ok.baseline_timing is not None
    assert got["wrong"].result.status is Status.MISMATCH
    assert (
        got["in_place"].result.status is Status.REJECTED
        and "input 0 was modified" in got["in_place"].result.message
    )
    assert got["raises"].result.status is Status.CRASH and "not written yet" in got["raises"].result.message
    cached = got["cached"].result  # verified (fresh tensors every time), caught once timed
    assert cached.status is Status.REJECTED  # on the verification's reused memory, or once timed
    assert (
        "a result kept from an earlier call" in cached.message
        or "not the output of its inputs" in cached.message
    )


GPU_ANSWERS = {  # per task: a correct ModelNew (pure torch), a wrong one, one that writes its input
    "relu": (RELU_OK, RELU_WRONG, RELU_IN_PLACE),
    "softmax_rows": (
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        e = torch.exp(x - x.amax(dim=1, keepdim=True))\n        return e / e.sum(dim=1, keepdim=True)\n",
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=0)\n",
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.softmax(x.sub_(0.5), dim=1)\n",
    ),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GPU_ANSWERS))
def test_the_gpu_evaluation_in_sandboxed_processes(gpu_executor: Any, name: str) -> None:
    good, bad, sneaky = GPU_ANSWERS[name]
    task = load_torch_file(DEFAULT_TORCH_TASKS / f"{name}.py")
    cached = task.text.replace("class Model(", "class Reference(") + CACHED  # caches by pointer
    cands = tuple(
        TorchCandidate(k, "import torch\n" + textwrap.dedent(b))
        for k, b in (("good", good), ("bad", bad), ("sneaky", sneaky), ("cached", cached))
    )
    budget = Budget(min_samples=10, max_samples=60, time_budget_ms=200)
    result = gpu_executor.evaluate_torch(TorchRequest(name, task.text, cands, seeds=(1, 2), budget=budget))
    got = {r.result.candidate_id: r for r in result.candidates}
    ok = got["good"]
    assert ok.result.status is Status.OK, ok.result.message
    assert ok.result.pairs >= 10 and ok.result.baseline_timing is not None
    assert 0 < ok.result.speedup_low <= ok.result.speedup <= ok.result.speedup_high
    assert 0 < ok.compiled_speedup_low <= ok.compiled_speedup, ok.result.note
    if name == "relu":  # the same one kernel as eager
        assert 0.7 < ok.result.speedup < 1.4
    assert got["bad"].result.status is Status.MISMATCH
    assert got["sneaky"].result.status is Status.REJECTED
    assert "input 0 was modified" in got["sneaky"].result.message
    cached_msg = got["cached"].result.message
    assert got["cached"].result.status is Status.REJECTED, cached_msg
    assert "not the output of its inputs" in cached_msg or "kept from an earlier call" in cached_msg
    assert 0 < ok.footprint_bytes <= ok.peak_memory_bytes  # the task's own memory, and the most held
    assert ok.peak_memory_bytes <= 3 * ok.footprint_bytes + (3 << 30)


def test_a_torch_job_and_its_verdict_cross_the_worker_wire_as_json() -> None:
    from dataclasses import replace

    from sandbox.contract import CandidateResult, ContractError, TorchCandidateResult
    from sandbox.wire import Reply, TorchJob, decode_job, decode_reply, encode

    job = TorchJob(_tiny_request(time=False), 1)
    assert decode_job(encode(job)) == job
    verdict = TorchCandidateResult(CandidateResult("wrong", Status.MISMATCH, "bad"), compiled_speedup=0.5)
    assert decode_reply(encode(Reply(verdict)), job).value == verdict
    forged = replace(verdict, result=replace(verdict.result, candidate_id="ok"))
    with pytest.raises(ContractError, match="answered for 'ok'"):
        decode_reply(encode(Reply(forged)), job)


class _Device:
    type = "cpu"


class FakeTensor:
    """What :func:`sandbox.torch_eval.compare_outputs` reads of a tensor, over a numpy array."""

    device = _Device()

    def __init__(self, a: Any) -> None:
        self.a = np.ascontiguousarray(a)
        self.shape = self.a.shape
        self.dtype = f"torch.{self.a.dtype}"

    def numel(self) -> int:
        return int(self.a.size)

    def detach(self) -> FakeTensor:
        return self

    def contiguous(self) -> FakeTensor:
        return self

    def cpu(self) -> FakeTensor:
        return self

    def reshape(self, *shape: int) -> FakeTensor:
        return FakeTensor(self.a.reshape(*shape))

    def __getitem__(self, part: slice) -> FakeTensor:
        return FakeTensor(self.a[part])

    def numpy(self) -> Any:
        return self.a


def test_outputs_are_compared_with_the_sandboxs_tolerance_model() -> None:
    from sandbox.torch_eval import compare_outputs, reduction_length

    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    ref = x.sum(axis=1, keepdims=True, dtype=np.float32)  # pairwise
    sequential = np.cumsum(x, axis=1, dtype=np.float32)[:, -1:]  # another order: roundoff apart
    moved = (x * np.float32(1 + 2**-10)).sum(axis=1, keepdims=True, dtype=np.float32)
    n = reduction_length([FakeTensor(x)], [], [FakeTensor(ref)])
    assert n == 4096
    T = FakeTensor

    def check(got: Any) -> Any:
        return compare_outputs("bench", 1, [T(ref)], [T(moved)], [T(got)], n)

    assert not np.array_equal(sequential, ref) and check(sequential).ok
    assert not check(ref * np.float32(1.001)).ok  # 0.1% off: far beyond fp32 roundoff
    nan = ref.copy()
    nan[3, 0] = np.nan
    assert "expected" in check(nan).detail and not check(nan).ok
    wrong_shape = check(ref.reshape(-1))
    assert not wrong_shape.ok and "the reference's" in wrong_shape.detail
    wrong_type = check(ref.astype(np.float64))
    assert not wrong_type.ok and "float64" in wrong_type.detail
    extra = compare_outputs("bench", 1, [T(ref)], [T(moved)], [T(ref), T(ref)], n)
    assert not extra.ok and "2 outputs" in extra.detail


def test_large_outputs_are_compared_in_pieces_with_the_same_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    import sandbox.torch_eval as torch_eval

    rng = np.random.default_rng(3)
    x = rng.standard_normal((256, 512)).astype(np.float32)
    ref, moved = np.tanh(x), np.tanh(x * np.float32(1 + 2**-10))
    bad = ref.copy()
    bad[200, 7] += 0.01
    T = FakeTensor

    def check(got: Any) -> Any:
        return torch_eval.compare_outputs("bench", 1, [T(ref)], [T(moved)], [T(got)], 1)

    whole = check(bad)
    monkeypatch.setattr(torch_eval, "CHUNK", 4096)  # 32 pieces
    assert check(ref).ok and check(np.tanh(x.astype(np.float64)).astype(np.float32)).ok
    pieces = check(bad)
    assert not whole.ok and not pieces.ok
    # the same element found; its bound from its own piece's statistics
    assert pieces.detail.split(" (")[0] == whole.detail.split(" (")[0] and "expected" in pieces.detail


def test_each_answer_runs_in_a_fresh_process_and_a_hang_or_a_death_is_its_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sandbox.local
    from sandbox.local import LocalExecutor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(UNSAFE_TORCH_ENV, "1")
    monkeypatch.setattr(sandbox.local, "BUILD_ALLOWANCE_S", 0.0)
    sources = {"first": "ok", "hang": "HANG", "die": "DIE", "second": "ok"}
    cands = tuple(TorchCandidate(k, v) for k, v in sources.items())
    request = TorchRequest("life", "the task", cands, budget=Budget(timeout_s=2.0))
    with LocalExecutor(
        handler="sandbox_fakes:ScriptedHandler",
        torch_handler="reward_fakes:ScriptedTorchHandler",
        sandbox=False,
        compile_workers=1,
    ) as executor:
        result = executor.evaluate_torch(request)
    got = {r.result.candidate_id: r.result for r in result.candidates}
    assert list(got) == list(sources)
    assert got["hang"].status is Status.TIMEOUT and "deadline" in got["hang"].message
    assert got["die"].status is Status.CRASH and "exit status 3" in got["die"].message
    assert got["first"].status is Status.OK and got["second"].status is Status.OK
    assert got["first"].message != got["second"].message  # another process


def test_without_bubblewrap_answers_are_refused_unless_the_operator_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ModelNew is host code: an executor whose workers are not inside bubblewrap refuses to run
    it (one clear error, no process started) unless CUDA_AGENT_UNSAFE_TORCH=1."""
    from sandbox.executor import ExecutorError
    from sandbox.local import LocalExecutor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(UNSAFE_TORCH_ENV, raising=False)
    request = TorchRequest("r", "the task", (TorchCandidate("a", "ok"),), budget=Budget(timeout_s=2.0))
    with (
        LocalExecutor(
            handler="sandbox_fakes:ScriptedHandler",
            torch_handler="reward_fakes:ScriptedTorchHandler",
            sandbox=False,
            compile_workers=1,
        ) as executor,
        pytest.raises(ExecutorError, match="bubblewrap"),
    ):
        executor.evaluate_torch(request)


MEMORY_TABLE = Path(__file__).resolve().parents[1] / "bench" / "results" / "kernelbench_memory.json"
KERNELBENCH = Path(os.environ.get("KERNELBENCH_DIR", "/work/shared/kernelbench"))
H100_BYTES = 80 * 10**9


def test_every_kernelbench_file_fits_an_80gb_h100_under_the_memory_plan() -> None:
    """The committed table (``bench/kernelbench_memory.py``: shapes from the meta device) holds all
    250 files, each planned within 3x its footprint plus the overhead, and within 80 GB; the plan
    is the code's (a stale table fails)."""
    from sandbox.torch_eval import PLAN_FACTOR, PLAN_OVERHEAD, TaskMemory

    rows = json.loads(MEMORY_TABLE.read_text())["rows"]
    assert len(rows) == 250 and all("planned" in r for r in rows), [r for r in rows if "planned" not in r]
    for r in rows:
        fp = TaskMemory(r["inputs"], r["outputs"], r["params"])
        assert fp.planned == r["planned"] and fp.total == r["footprint"], r["file"]
        assert fp.planned <= PLAN_FACTOR * fp.total + PLAN_OVERHEAD, r["file"]
        assert fp.planned <= H100_BYTES, r["file"]
    relu = next(r for r in rows if r["file"] == "level1/19_ReLU.py")
    assert relu["inputs"] == relu["outputs"] == 4096 * 393216 * 4  # the 6 GiB input that OOMed


@needs_torch
@pytest.mark.slow
@pytest.mark.skipif(
    not KERNELBENCH.is_dir(), reason=f"no KernelBench task files at {KERNELBENCH} (KERNELBENCH_DIR)"
)
def test_the_memory_plan_recomputed_from_every_kernelbench_file_matches_the_table() -> None:
    from sandbox.torch_eval import footprint

    rows = {r["file"]: r for r in json.loads(MEMORY_TABLE.read_text())["rows"]}
    files = sorted(KERNELBENCH.glob("level*/*.py"))
    assert len(files) == 250
    for path in files:
        fp = footprint(path.read_text())
        row = rows[str(path.relative_to(KERNELBENCH))]
        assert (fp.inputs, fp.outputs, fp.params) == (row["inputs"], row["outputs"], row["params"]), path.name
        assert fp.planned <= H100_BYTES


@needs_torch
def test_timed_inputs_are_rescaled_in_place_without_a_copy_to_refill_from() -> None:
    import torch

    from sandbox.torch_eval import FRESH_STEP, _Bench
    from sandbox.torch_trust import TorchClock

    x, n = torch.arange(1.0, 9.0), torch.arange(4)
    b = _Bench(TorchClock(torch, torch.device("cpu")), [x.clone(), n.clone()], None, 0.0, 0.0)  # type: ignore[arg-type]
    ptr = b.live[0].data_ptr()
    for _ in range(3):
        b.refill(0)
    assert b.live[0].data_ptr() == ptr
    assert torch.allclose(b.live[0], x * (1 + 3 * FRESH_STEP)) and torch.equal(b.live[1], n)
    b.load([x, n])
    assert torch.equal(b.live[0], x) and b.scale == 1.0


@needs_torch
def test_the_inputs_untouched_check_sees_one_byte_in_its_last_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from sandbox import torch_trust

    monkeypatch.setattr(torch_trust, "SAME_PIECE", 64)
    a = torch.zeros(1000)
    b = a.clone()
    assert torch_trust.same_bytes(torch, a, b)
    b.view(torch.uint8)[-1] = 1
    assert not torch_trust.same_bytes(torch, a, b)
