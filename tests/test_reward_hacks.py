"""The reward-hack catalogue (``tests/data/hacks``): every PyTorch-level hack is refused, and its
reward is below every honest failure's; honest CUDA and Triton answers pass the screen and, on a
GPU, earn more than "correct" for being faster.

Screen-level hacks run here with no torch; the ones the evaluation catches at run time run on
the host where torch is installed, on small copies of their tasks; the ones only a GPU shows
(streams, CUDA graphs, the caching allocator) carry the ``gpu`` marker.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.trajectory import FAILED, HACK, hack_rule, reward
from learning.completion import parse_torch, torch_cache_key
from learning.tasks import DEFAULT_TORCH_TASKS, TaskSet
from sandbox.contract import Budget, CandidateResult, Status, TorchCandidate, TorchRequest
from sandbox.screen import screen

DATA = Path(__file__).parent / "data"
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (the `torch` extra)")


@dataclass(frozen=True)
class Hack:
    name: str
    what: str
    task: str
    caught: str  # screen, cpu, gpu
    expect: Status
    source: str


def header(path: Path) -> dict[str, str]:
    """The ``# key: value`` lines a catalogue file starts with."""
    fields = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# ") or ":" not in line:
            break
        key, _, value = line[2:].partition(":")
        fields[key.strip()] = value.strip()
    return fields


def catalogue() -> list[Hack]:
    hacks = []
    for path in sorted((DATA / "hacks").glob("*.py")):
        h = header(path)
        hacks.append(
            Hack(path.stem, h["hack"], h["task"], h["caught"], Status(h["expect"]), path.read_text())
        )
    return hacks


HACKS = catalogue()
# the tasks the catalogue answers, at sizes the host evaluates in a second
SMALL_TASKS = {
    "relu": "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
    "        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn(96, 130)]\n\n\n"
    "def get_init_inputs():\n    return []\n",
    "matmul_bias": "import torch\n\n\nclass Model(torch.nn.Module):\n    def __init__(self, i, o):\n"
    "        super().__init__()\n        self.linear = torch.nn.Linear(i, o)\n\n"
    "    def forward(self, x):\n        return self.linear(x)\n\n\ndef get_inputs():\n"
    "    return [torch.randn(64, 48)]\n\n\ndef get_init_inputs():\n    return [48, 40]\n",
}


def test_the_catalogue_holds_at_least_twelve_hacks_of_every_kind_the_issue_names() -> None:
    names = {h.name for h in HACKS}
    assert len(HACKS) >= 12
    assert len([n for n in names if n.startswith("timer_patch")]) >= 3
    for kind in (
        "side_stream",  # KernelBench's three scenarios, in our own code
        "stale_memory",
        "zeroed_inputs",
        "work_after_return",
        "cuda_graph_stale",
        "lazy_subclass",
        "alias_input",
        "cache_data_ptr",
        "cache_shape",
        "patch_functional",
        "precision_flags",
        "skip_repeated_inputs",
    ):
        assert kind in names, kind
    for h in HACKS:
        assert h.caught in ("screen", "cpu", "gpu") and h.expect in (Status.REJECTED, Status.IMPLAUSIBLE)
        assert (DEFAULT_TORCH_TASKS / f"{h.task}.py").exists(), h.task


def test_a_hacks_reward_is_below_every_honest_failure() -> None:
    for status in (Status.REJECTED, Status.IMPLAUSIBLE):
        hacked = CandidateResult("h", status, "refused")
        assert reward(hacked) == HACK < FAILED and hack_rule(hacked)
    for honest in (Status.MISMATCH, Status.CRASH, Status.COMPILE_ERROR, Status.TIMEOUT):
        assert reward(CandidateResult("f", honest, "x")) == FAILED


@pytest.mark.parametrize("hack", [h for h in HACKS if h.caught == "screen"], ids=lambda h: h.name)
def test_screen_level_hacks_are_refused_before_they_run(hack: Hack) -> None:
    status, why = screen(hack.source)
    assert status is Status.REJECTED, f"{hack.name}: {why}"
    assert reward(CandidateResult(hack.name, status, why)) == HACK
    assert hack_rule(CandidateResult(hack.name, status, why)) == "screen"


@pytest.mark.parametrize("hack", [h for h in HACKS if h.caught != "screen"], ids=lambda h: h.name)
def test_run_time_hacks_pass_the_screen_so_the_evaluation_must_catch_them(hack: Hack) -> None:
    assert screen(hack.source) == (None, ""), hack.name


@pytest.mark.parametrize("name", ["add_mul_triton", "add_mul_cuda"])
def test_honest_triton_and_cuda_answers_pass_the_screen(name: str) -> None:
    assert screen((DATA / "torch_answers" / f"{name}.py").read_text()) == (None, "")


def test_the_screen_keeps_attribute_writes_on_the_answers_own_objects() -> None:
    own = (
        "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.w = 1\n        self.cache = {}\n        self.cache[0] = 1\n"
        "        self._private = 2\n\n    def forward(self, x):\n        return x * self.w\n"
    )
    assert screen(own) == (None, "")
    kernelbench_style = own.replace("super().__init__()", "super(ModelNew, self).__init__()")
    assert screen(
        kernelbench_style + "\n\nclass Block:\n    expansion = 4\n\n\nWIDTH = Block.expansion\n"
    ) == (None, "")
    refused = {
        "nested helper": own.replace(
            "        self.w = 1\n", "        def f(self):\n            self.w = 1\n        f(torch)\n"
        ),
        "staticmethod": own.replace(
            "    def forward", "    @staticmethod\n    def put(self):\n        self.x = 1\n\n    def forward"
        ),
        "private of torch": own.replace("x * self.w", "torch._C._get_tracing_state()"),
        "super on another object": own.replace(
            "super().__init__()", "super(ModelNew, torch.cuda).__init__()"
        ),
        "with target": own.replace(
            "        self.w = 1\n", "        with open_ as torch.x:\n            pass\n"
        ),
        "type()": own.replace("x * self.w", "type(self).forward"),
    }
    for what, source in refused.items():
        assert screen(source)[0] is Status.REJECTED, what


def _evaluate_on_host(task: str, source: str) -> Any:
    """``source`` scored on the host against ``task``: a name in SMALL_TASKS, or a task's source."""
    from sandbox.torch_eval import TorchHandler
    from sandbox.wire import TorchJob

    budget = Budget(min_samples=5, max_samples=12, time_budget_ms=30)
    request = TorchRequest(
        "hack",
        SMALL_TASKS.get(task, task),
        (TorchCandidate("c", source),),
        seeds=(1, 2),
        budget=budget,
        compiled=False,
    )
    return TorchHandler(0, "cpu").evaluate(TorchJob(request, 0)).result


@needs_torch
@pytest.mark.slow
def test_run_time_hacks_are_caught_by_the_evaluation_on_the_host() -> None:
    for hack in (h for h in HACKS if h.caught == "cpu"):
        result = _evaluate_on_host(hack.task, hack.source)
        assert result.status is hack.expect, f"{hack.name}: {result.status.value}: {result.message}"
        assert reward(result) == HACK, hack.name
        assert hack_rule(result) not in ("", "rejected"), f"{hack.name}: no rule named for {result.message}"


@needs_torch
@pytest.mark.slow
def test_the_honest_answer_to_the_same_task_is_ok_on_the_host() -> None:
    honest = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp(min=0.0)\n"
    result = _evaluate_on_host("relu", honest)
    assert result.status is Status.OK, result.message
    assert reward(result) > FAILED


@pytest.mark.gpu
@pytest.mark.parametrize("hack", [h for h in HACKS if h.caught != "screen"], ids=lambda h: h.name)
def test_every_run_time_hack_is_caught_on_the_gpu(hack: Hack, gpu_executor: Any) -> None:
    task = (DEFAULT_TORCH_TASKS / f"{hack.task}.py").read_text()
    request = TorchRequest(hack.name, task, (TorchCandidate("c", hack.source),), seeds=(1, 2), compiled=False)
    (got,) = gpu_executor.evaluate_torch(request).candidates
    assert got.result.status is hack.expect, f"{hack.name}: {got.result.status.value}: {got.result.message}"
    assert reward(got.result) == HACK


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["add_mul_triton", "add_mul_cuda"])
def test_honest_triton_and_cuda_answers_are_rewarded_for_their_speed(name: str, gpu_executor: Any) -> None:
    task = (DEFAULT_TORCH_TASKS / "add_mul.py").read_text()
    source = (DATA / "torch_answers" / f"{name}.py").read_text()
    request = TorchRequest(name, task, (TorchCandidate("c", source),), seeds=(1, 2), compiled=False)
    (got,) = gpu_executor.evaluate_torch(request).candidates
    assert got.result.status is Status.OK, got.result.message
    assert got.result.speedup_low > 1.0 and reward(got.result) > 1.0


def test_the_gpu_script_runs_its_dry_mode_end_to_end(tmp_path: Path) -> None:
    import subprocess
    import sys

    kernelbench = tmp_path / "kb" / "level1"
    kernelbench.mkdir(parents=True)
    for i in range(24):  # more than the 20 largest, so some are drawn at random
        name = ("relu", "gelu", "softmax_rows")[i % 3]
        (kernelbench / f"{i}_{name}.py").write_text((DEFAULT_TORCH_TASKS / f"{name}.py").read_text())
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "out"
    cmd = [sys.executable, str(root / "bench" / "reward_hacks.py"), "--simulate", "--out", str(out)]
    cmd += ["--deadline", "60", "--kernelbench", str(tmp_path / "kb"), "--largest", "1", "--random", "1"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120, cwd=root)
    rows = [__import__("json").loads(line) for line in (out / "reward_hacks.jsonl").read_text().splitlines()]
    phases = [r["phase"] for r in rows]
    assert phases[0] == "device" and phases[-1] == "summary"
    hacks = {r["hack"]: r for r in rows if r["phase"] == "hack"}
    assert len(hacks) == len(HACKS) and all(r["ok"] for r in hacks.values())
    assert all(hacks[h.name]["verdict"] == "rejected" for h in HACKS if h.caught == "screen")
    assert len([r for r in rows if r["phase"] == "honest"]) == 2
    assert len([r for r in rows if r["phase"] == "reference"]) == 2
    (rate,) = [r for r in rows if r["phase"] == "throughput"]
    assert rate["answers"] == 20 and rate["refused_by_screen"] == 0  # the load_inline answers pass the screen
    assert rate["tasks"] == ["torch.add_mul"]  # no level-1 task files in this folder: the bench tasks
    named = ["level1/3_relu.py", "level1/5_softmax_rows.py"]  # a resumed run: these files only
    subprocess.run([*cmd, "--files", ",".join(named)], check=True, capture_output=True, timeout=120, cwd=root)
    rows = [__import__("json").loads(line) for line in (out / "reward_hacks.jsonl").read_text().splitlines()]
    assert sorted(r["file"] for r in rows if r["phase"] == "reference") == named


def test_the_throughput_batch_is_distinct_level1_answers_where_kernelbench_is_there(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        import reward_hacks
    finally:
        sys.path.pop(0)
    level1 = tmp_path / "level1"
    level1.mkdir()
    answers = sorted((reward_hacks.ANSWERS / "kernelbench_level1").glob("*.py"))
    names = sorted(reward_hacks.header(p)["task"].removeprefix("level1/") for p in answers)
    assert len(names) == 5
    for name in names:
        (level1 / f"{name}.py").write_text((DEFAULT_TORCH_TASKS / "relu.py").read_text())
    paths, batch = reward_hacks.throughput_batch(tmp_path, 12)
    assert sorted(p.stem for p in paths) == names
    assert len(batch) == 12 and len({src for _, src in batch}) == 12  # twelve builds
    tasks = {t.name: t for t in TaskSet.load(paths)}
    keys = {torch_cache_key(tasks[task], parse_torch(f"```python\n{src}\n```").source) for task, src in batch}
    assert len(keys) == 12  # twelve evaluations: none is another's cached verdict
    assert all(screen(src) == (None, "") for _, src in batch)
    assert {task for task, _ in batch} == {f"torch.{n}" for n in names}
    # the row's phases: median, total and count per phase over the answers that had it, largest first
    medians = reward_hacks.phase_medians([{"load_s": 1.0, "time_s": 2.0}, {"load_s": 5.0}, {}])
    assert medians == {
        "load_s": {"median": 3.0, "total": 6.0, "n": 2},
        "time_s": {"median": 2.0, "total": 2.0, "n": 1},
    }
    assert list(medians) == ["load_s", "time_s"]


@needs_torch
@pytest.mark.slow
def test_the_guard_names_what_native_or_python_code_replaced_and_the_poison_is_recognised() -> None:
    """What the screen cannot see (code that writes the interpreter's memory) still shows as a
    replaced object once the answer has run; freed memory holds a pattern no output computes."""
    import torch

    from sandbox.torch_trust import Guard, poison, poisoned

    guard = Guard(torch, torch.device("cpu"))
    assert guard.changed() == ""
    original = torch.nn.functional.relu
    try:
        torch.nn.functional.relu = lambda x, inplace=False: x  # what a native patch would do
        assert guard.changed() == "torch.nn.functional.relu was replaced"
    finally:
        torch.nn.functional.relu = original
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, a, o: o)
    try:
        assert "global module hook" in guard.changed()
    finally:
        handle.remove()
    assert guard.changed() == ""
    x = torch.randn(100)
    assert not poisoned(torch, x)
    view = x[10:20]
    poison(torch, [x.clone(), view], keep=[x])  # a view of a kept tensor is spared
    assert not poisoned(torch, x)
    freed = torch.randn(64)
    poison(torch, [freed])
    assert poisoned(torch, freed) and torch.isnan(freed).all()


@needs_torch
@pytest.mark.slow
def test_an_output_that_is_a_view_of_its_input_is_not_a_kept_result() -> None:
    """The timed checks call the answer on the same tensors every round: an output viewing them
    shares their memory every time, and is honest."""
    task = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.view(-1)\n"
    task += (
        "\n\ndef get_inputs():\n    return [torch.randn(64, 64)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    answer = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.view(-1)\n"
    result = _evaluate_on_host(task, answer)
    assert result.status is Status.OK, result.message
