"""The build stage of PyTorch answers (``sandbox.torch_build``): parallel, bounded, cached by
source across requests, a failing build is that item's verdict, a deadline is a timeout."""

from __future__ import annotations

import importlib.util
import itertools
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from sandbox.contract import Budget, Status, TorchCandidate, TorchRequest
from sandbox.torch_build import BuildPool, build_here, build_key, spawn_builder
from sandbox.wire import BuildJob, Built, Reply, decode_reply, encode, failed_reply

UNSAFE_TORCH_ENV = "CUDA_AGENT_UNSAFE_TORCH"
HAS_TORCH = importlib.util.find_spec("torch") is not None

ANSWER = """
import torch
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="ext_{n}", cpp_sources="int f() {{ return {n}; }}", functions=["f"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x * ext.f()
"""


class StubBuilder:
    """A builder that takes ``seconds`` (``long_s`` for a source holding ``LONG``), counts calls
    and the most at once; a source holding ``BROKEN`` fails to build."""

    def __init__(self, seconds: float = 0.05, long_s: float = 0.0) -> None:
        self.seconds = seconds
        self.long_s = long_s
        self.calls: list[str] = []
        self.running = self.most = 0
        self.lock = threading.Lock()

    def __call__(self, job: BuildJob, seconds: float) -> Built:
        with self.lock:
            self.calls.append(job.source)
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(self.long_s if "LONG" in job.source else self.seconds)
        with self.lock:
            self.running -= 1
        assert Path(job.directory).is_dir()  # the pool made it before building
        if "BROKEN" in job.source:
            return Built(Status.COMPILE_ERROR, "building the extension failed: nvcc says no", self.seconds)
        return Built(None, "built", self.seconds)


def test_builds_run_in_parallel_within_the_bound(tmp_path: Path) -> None:
    stub = StubBuilder(seconds=0.1)
    pool = BuildPool(stub, workers=3, root=tmp_path, version="2.11")
    try:
        futures = [pool.submit(ANSWER.format(n=i), "9.0") for i in range(9)]
        results = [f.result(timeout=10) for f in futures]
    finally:
        pool.close()
    assert all(r.verdict is None for r in results)
    assert len(stub.calls) == 9
    assert stub.most == 3  # parallel, never past the bound


def test_one_source_builds_once_across_requests_and_across_pools(tmp_path: Path) -> None:
    stub = StubBuilder()
    first = BuildPool(stub, workers=2, root=tmp_path, version="2.11")
    try:
        a = first.submit(ANSWER.format(n=1), "9.0")
        b = first.submit(ANSWER.format(n=1), "9.0")  # in flight: the same build
        assert a is b
        a.result(timeout=10)
        again = first.submit(ANSWER.format(n=1), "9.0").result(timeout=10)  # a later request
        other_arch = first.submit(ANSWER.format(n=1), "8.0").result(timeout=10)
    finally:
        first.close()
    assert again.verdict is None and len(stub.calls) == 2  # once per arch
    assert other_arch.verdict is None
    # a new process (service restart): the verdict recorded on disk
    second = BuildPool(stub, workers=2, root=tmp_path, version="2.11")
    try:
        stored = second.submit(ANSWER.format(n=1), "9.0").result(timeout=10)
    finally:
        second.close()
    assert stored.cached and stored.verdict is None and len(stub.calls) == 2
    # another torch: another key, built again
    assert build_key("s", "9.0", "2.11") != build_key("s", "9.0", "2.12")


def test_a_failed_build_is_final_and_a_deadline_is_not(tmp_path: Path) -> None:
    stub = StubBuilder()
    pool = BuildPool(stub, workers=1, root=tmp_path, version="2.11")
    try:
        broken = "# BROKEN\n" + ANSWER.format(n=2)
        failed = pool.submit(broken, "9.0").result(timeout=10)
        assert failed.verdict is Status.COMPILE_ERROR and "nvcc says no" in failed.message
        assert pool.submit(broken, "9.0").result(timeout=10).verdict is Status.COMPILE_ERROR
        assert stub.calls.count(broken) == 1  # a failure is cached too
        late = pool.submit(ANSWER.format(n=3), "9.0", deadline=time.monotonic() - 1).result(timeout=10)
        assert late.verdict is Status.TIMEOUT and not late.final
        assert ANSWER.format(n=3) not in stub.calls  # never started
        retry = pool.submit(ANSWER.format(n=3), "9.0").result(timeout=10)  # the next request builds it
        assert retry.verdict is None and ANSWER.format(n=3) in stub.calls
    finally:
        pool.close()
    assert pool.counts == {"built": 1, "hits": 1, "joined": 0, "failed": 1, "unsettled": 1}


def test_the_least_recently_used_builds_go_past_the_bound(tmp_path: Path) -> None:
    stub = StubBuilder(seconds=0.01)
    pool = BuildPool(stub, workers=1, root=tmp_path, version="2.11", max_entries=3)
    src = [ANSWER.format(n=i) for i in range(5)]
    try:
        for s in src[:3]:
            pool.submit(s, "9.0").result(timeout=10)
            time.sleep(0.02)
        pool.submit(src[0], "9.0").result(timeout=10)  # used again: the most recent now
        for s in src[3:]:
            time.sleep(0.02)
            pool.submit(s, "9.0").result(timeout=10)
        kept = {p.name for p in tmp_path.iterdir()}
        assert kept == {Path(pool.directory(s, "9.0")).name for s in (src[0], src[3], src[4])}
        assert pool.submit(src[1], "9.0").result(timeout=10).verdict is None  # evicted: built again
    finally:
        pool.close()
    assert stub.calls.count(src[1]) == 2 and stub.calls.count(src[0]) == 1


def test_a_builder_that_raises_leaves_the_answer_to_the_timing_worker(tmp_path: Path) -> None:
    def broken(job: BuildJob, seconds: float) -> Built:
        raise OSError("disk full")

    pool = BuildPool(broken, workers=1, root=tmp_path, version="2.11")
    try:
        built = pool.submit("x = 1", "9.0").result(timeout=10)
    finally:
        pool.close()
    assert built.verdict is None and not built.final and "disk full" in built.message


def test_without_torch_nothing_is_built_ahead(tmp_path: Path) -> None:
    stub = StubBuilder()
    pool = BuildPool(stub, root=tmp_path, version="")
    try:
        assert pool.submit("x = 1", "9.0").result(timeout=1).verdict is None
        assert pool.directory("x = 1", "9.0") == ""
    finally:
        pool.close()
    assert stub.calls == []


def test_build_verdicts_cross_the_wire() -> None:
    job = BuildJob("src", "/tmp/b", "9.0")
    for built in (Built(None, "built", 1.5), Built(Status.COMPILE_ERROR, "no", 2.0)):
        assert decode_reply(encode(Reply(built)), job).value == built
    hung = failed_reply(job, Status.TIMEOUT, "timed out")
    died = failed_reply(job, Status.CRASH, "exit status 9")
    assert isinstance(hung.value, Built) and hung.value.verdict is Status.TIMEOUT and not hung.value.final
    assert isinstance(died.value, Built) and died.value.verdict is None and not died.value.final


def _fake_torch(monkeypatch: pytest.MonkeyPatch, load_inline: Any) -> None:
    """``torch.utils.cpp_extension`` as far as a build imports it, and this process's build
    environment restored afterwards."""
    for name in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "TORCH_CUDA_ARCH_LIST", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.setenv(name, "before")
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch.utils")
    ext = types.ModuleType("torch.utils.cpp_extension")
    ext.load_inline = load_inline  # type: ignore[attr-defined]
    ext.load = load_inline  # type: ignore[attr-defined]

    class Module:
        pass

    torch.nn = types.SimpleNamespace(Module=Module)  # type: ignore[attr-defined]
    torch.utils, utils.cpp_extension = utils, ext  # type: ignore[attr-defined]
    for name, mod in (("torch", torch), ("torch.utils", utils), ("torch.utils.cpp_extension", ext)):
        monkeypatch.setitem(sys.modules, name, mod)


def test_build_here_tells_a_failed_extension_from_module_code_that_needs_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, str] = {}

    def load_inline(**kwargs: Any) -> Any:
        import os

        seen.update({k: os.environ[k] for k in ("TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST")})
        if "return 7" in kwargs["cpp_sources"]:
            raise RuntimeError("Error building extension 'ext_7'")
        return types.SimpleNamespace(f=lambda: 1)

    _fake_torch(monkeypatch, load_inline)
    directory = str(tmp_path / "key")
    ok = build_here(BuildJob(ANSWER.format(n=1), directory, "9.0"))
    assert ok.verdict is None and ok.message == "built"
    assert seen == {"TORCH_EXTENSIONS_DIR": f"{directory}/extensions", "TORCH_CUDA_ARCH_LIST": "9.0"}
    failed = build_here(BuildJob(ANSWER.format(n=7), directory, "9.0"))
    assert failed.verdict is Status.COMPILE_ERROR and "Error building extension" in failed.message
    gpu_at_import = ANSWER.format(n=1) + "\nx = torch.ones(3, device='cuda')\n"
    left = build_here(BuildJob(gpu_at_import, directory, "9.0"))
    assert left.verdict is None and "the GPU worker builds it" in left.message
    refused = build_here(BuildJob("import os\nos.system('id')\n", directory, "9.0"))
    assert refused.verdict is Status.REJECTED


def test_the_executor_gives_a_failed_build_its_verdict_and_times_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox.local import LocalExecutor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(UNSAFE_TORCH_ENV, "1")
    stub = StubBuilder()
    pool = BuildPool(stub, workers=2, root=tmp_path / "builds", version="2.11")
    cands = (TorchCandidate("good", "ok"), TorchCandidate("bad", "ok BROKEN"), TorchCandidate("also", "ok 2"))
    request = TorchRequest("r", "the task", cands, budget=Budget(timeout_s=5.0))
    with LocalExecutor(
        handler="sandbox_fakes:ScriptedHandler",
        torch_handler="reward_fakes:ScriptedTorchHandler",
        sandbox=False,
        compile_workers=1,
        builds=pool,
    ) as executor:
        first = executor.evaluate_torch(request)
        again = executor.evaluate_torch(TorchRequest("r2", "the task", cands, budget=Budget(timeout_s=5.0)))
    got = {r.result.candidate_id: r.result for r in first.candidates}
    assert got["bad"].status is Status.COMPILE_ERROR and "nvcc says no" in got["bad"].message
    assert got["good"].status is Status.OK and got["good"].message.startswith("pid ")  # timed
    assert got["also"].status is Status.OK
    assert [r.result.status for r in again.candidates] == [Status.OK, Status.COMPILE_ERROR, Status.OK]
    assert sorted(stub.calls) == sorted(c.source for c in cands)  # the second request built nothing


def _ran(message: str) -> tuple[float, float, float]:
    """(process start, evaluation start, evaluation end) of a ``ScriptedTorchHandler`` verdict."""
    words = message.split()
    began, ended = words[5].split("-")
    return float(words[3]), float(began), float(ended)


def test_built_answers_run_while_another_builds_each_process_started_while_the_one_before_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The device never waits for a build while a built answer waits: answers run in the order
    their builds end (a, b, c before the long build it was given first), one at a time, and the
    next answer's process (Python, torch, the device) starts while the one before it is evaluated
    (the third on the device started while the second ran), and every place ahead is given
    back.  Times are ``time.monotonic()``, one clock for the test and every worker process."""
    from sandbox.local import AHEAD, LocalExecutor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(UNSAFE_TORCH_ENV, "1")
    long_s = 6.0
    pool = BuildPool(StubBuilder(long_s=long_s), workers=4, root=tmp_path / "builds", version="2.11")
    sources = {"long": "LONG BUSY", "a": "BUSY a", "b": "BUSY b", "c": "BUSY c"}
    cands = tuple(TorchCandidate(k, v) for k, v in sources.items())
    with LocalExecutor(
        handler="sandbox_fakes:ScriptedHandler",
        torch_handler="reward_fakes:ScriptedTorchHandler",
        sandbox=False,
        compile_workers=1,
        builds=pool,
    ) as executor:
        executor.device_info()
        begun = time.monotonic()
        result = executor.evaluate_torch(TorchRequest("r", "the task", cands, budget=Budget(timeout_s=30.0)))
        assert all(executor._ahead.acquire(blocking=False) for _ in range(AHEAD))  # every place given back
    assert [r.result.candidate_id for r in result.candidates] == list(sources)  # in request order
    got = {r.result.candidate_id: r for r in result.candidates}
    assert all(r.result.status is Status.OK for r in got.values()), [r.result.message for r in got.values()]
    ran = {k: _ran(r.result.message) for k, r in got.items()}
    order = sorted(ran, key=lambda k: ran[k][1])
    assert order[-1] == "long" and max(ran[k][2] for k in "abc") < begun + long_s <= ran["long"][1]
    assert all(ran[x][2] <= ran[y][1] for x, y in itertools.pairwise(order))  # one at a time
    assert ran[order[2]][0] < ran[order[1]][2]  # started while the one before it ran
    for r in got.values():  # the executor's phases beside the worker's
        assert {"build_wait_s", "build_s", "queue_s", "spawn_s", "worker_s", "time_s"} <= set(r.phases)
    assert got["long"].phases["build_wait_s"] > 1.0 > got["c"].phases["build_wait_s"]


def test_a_request_waiting_for_a_build_leaves_the_device_to_another_requests_built_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests at once (two tasks' groups): the one whose answer is still building does not
    hold the device, so the other's built answers run meanwhile."""
    from sandbox.local import LocalExecutor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(UNSAFE_TORCH_ENV, "1")
    long_s = 5.0
    pool = BuildPool(StubBuilder(long_s=long_s), workers=4, root=tmp_path / "builds", version="2.11")
    waiting = TorchRequest(
        "w", "task w", (TorchCandidate("long", "LONG BUSY"),), budget=Budget(timeout_s=30.0)
    )
    built = (TorchCandidate("x", "BUSY x"), TorchCandidate("y", "BUSY y"))
    other = TorchRequest("o", "task o", built, budget=Budget(timeout_s=30.0))
    with LocalExecutor(
        handler="sandbox_fakes:ScriptedHandler",
        torch_handler="reward_fakes:ScriptedTorchHandler",
        sandbox=False,
        compile_workers=1,
        builds=pool,
    ) as executor:
        executor.device_info()
        begun = time.monotonic()
        first = threading.Thread(target=executor.evaluate_torch, args=(waiting,))
        first.start()
        time.sleep(0.2)  # the waiting request asked first
        result = executor.evaluate_torch(other)
        first.join(timeout=60)
    ran = [_ran(r.result.message) for r in result.candidates]
    assert all(r.result.status is Status.OK for r in result.candidates)
    assert max(end for _, _, end in ran) < begun + long_s  # both ran while the long answer built


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (the `torch` extra)")
def test_a_real_build_leaves_the_timing_process_only_a_load(tmp_path: Path) -> None:
    """A C++ ``load_inline`` answer built by a build worker (unconfined here): a fresh process
    pointed at the same directory loads it without building (ninja has nothing to do)."""
    import subprocess

    pool = BuildPool(spawn_builder(()), workers=1, root=tmp_path, wall_s=600.0)
    source = ANSWER.format(n=5)
    try:
        built = pool.submit(source, "").result(timeout=600)
    finally:
        pool.close()
    assert built.verdict is None and built.message == "built", built.message
    directory = pool.directory(source, "")
    probe = (
        "import sys, time; from sandbox.torch_eval import _module, point_at; point_at(sys.argv[1], '');"
        "t = time.perf_counter(); m = _module(sys.argv[2], 'answer.py');"
        "print(m['ext'].f(), time.perf_counter() - t)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, directory, source],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.split()
    assert out[0] == "5" and float(out[1]) < min(10.0, built.seconds), out


FAKE_CPP_EXTENSION = '''
import os


def load_inline(name, cpp_sources="", cuda_sources="", functions=(), **kwargs):
    """Stands in for torch's: "builds" into TORCH_EXTENSIONS_DIR, fails on a source that says so."""
    if "return 7" in cpp_sources:
        raise RuntimeError(f"Error building extension '{name}'")
    folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name + ".so"), "w") as f:
        f.write(os.environ.get("TORCH_CUDA_ARCH_LIST", "") + "|" + os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))

    class Module:
        @staticmethod
        def f():
            return 1

    return Module


load = load_inline
'''


def test_a_build_worker_process_builds_into_the_key_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real process path (spawned worker, JSON wire, handler, environment) with a stand-in
    ``torch`` on the worker's path: the build lands in ``<root>/<key>/extensions`` for the arch
    list asked, with no GPU visible; a failing build comes back as the answer's verdict."""
    fake = tmp_path / "fake"
    (fake / "torch" / "utils").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("from torch import nn, utils\n")
    (fake / "torch" / "nn.py").write_text("class Module:\n    pass\n")
    (fake / "torch" / "utils" / "__init__.py").write_text("")
    (fake / "torch" / "utils" / "cpp_extension.py").write_text(FAKE_CPP_EXTENSION)
    monkeypatch.syspath_prepend(str(fake))  # the worker's PYTHONPATH is this process's path
    pool = BuildPool(spawn_builder(()), workers=2, root=tmp_path / "builds", version="2.11")
    try:
        good, bad = (pool.submit(ANSWER.format(n=n), "9.0") for n in (1, 7))
        built, failed = good.result(timeout=60), bad.result(timeout=60)
    finally:
        pool.close()
    assert built.verdict is None and built.message == "built", built.message
    so = Path(pool.directory(ANSWER.format(n=1), "9.0")) / "extensions" / "ext_1" / "ext_1.so"
    assert so.read_text() == "9.0|"  # the arch list asked; no GPU visible to the build
    assert failed.verdict is Status.COMPILE_ERROR and "Error building extension 'ext_7'" in failed.message


def test_the_gpus_of_one_host_share_one_build_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds take the host's cores: several GPUs' executors draw on one bounded pool."""
    from sandbox import compile_pool
    from sandbox.executors import ExecutorSettings, make_executor
    from sandbox.scheduler import GpuScheduler

    monkeypatch.setattr(compile_pool._Policy, "unisolated_allowed", True)  # whatever this host has
    with make_executor(ExecutorSettings(kind="local", gpus=(0, 1))) as ex:
        assert isinstance(ex, GpuScheduler)
        pools = {id(lane.executor.builds) for lane in ex.lanes}  # type: ignore[attr-defined]
    assert len(pools) == 1
