"""Scheduling over N fake GPUs (``sandbox.scheduler``): a request and a kernel stay on one GPU,
kernels spread over the GPUs, every candidate is answered once, a failed GPU's request runs again
on another (or is reported naming both GPUs), and the suite gives the same verdicts on one GPU and
on three, in a fraction of the time."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from polling import poll_until
from sandbox_fakes import FakeGpu, kernel_file, vadd_request
from test_suite import run_cli

from agent.proposer import parse_budget
from agent.suite import run_suite
from sandbox.contract import Candidate, EvalRequest, EvalResult, KernelSource, Status
from sandbox.executor import NoGpuError, WorkerUnavailable
from sandbox.local import LocalExecutor
from sandbox.scheduler import GpuListError, GpuScheduler, Lane, affinity_key, gpu_count, parse_gpus, session

KERNELS = Path(__file__).parent.parent / "bench" / "kernels"
SUITE = ("vadd_poor_block.cu", "block_sum.cu", "transpose.cu", "saxpy.cu", "gelu.cu", "sigmoid.cu")

Log = list[tuple[int, str, str]]  # (GPU, request id, baseline source) in the order they started


def gpus(n: int, log: Log, **kw: object) -> list[FakeGpu]:
    return [FakeGpu(i, log, **kw) for i in range(n)]  # type: ignore[arg-type]


def scheduler(fakes: list[FakeGpu]) -> GpuScheduler:
    return GpuScheduler([Lane(f, f.index) for f in fakes])


def kernel(k: int) -> KernelSource:
    """A distinct baseline per ``k``: a distinct kernel to pin."""
    return KernelSource(f"// kernel {k}\n__global__ void vadd(float* c) {{ c[0] = {k}; }}\n", "vadd")


def request(k: int, batch: int, candidates: int = 3) -> EvalRequest:
    base = kernel(k)
    cands = tuple(
        Candidate(f"k{k}-b{batch}-c{i}", replace(base, source=base.source + f"// c{i}\n"))
        for i in range(candidates)
    )
    return vadd_request(base, cands, request_id=f"k{k}-b{batch}")


def run_kernels(ex: GpuScheduler, kernels: int, batches: int) -> dict[str, EvalResult]:
    """``kernels`` optimize-run-like clients at once, each sending its batches one after another."""

    def client(k: int) -> list[EvalResult]:
        return [ex.evaluate(request(k, b)) for b in range(batches)]

    with ThreadPoolExecutor(kernels) as pool:
        return {r.request_id: r for rs in pool.map(client, range(kernels)) for r in rs}


def lanes_per_kernel(log: Log) -> dict[str, set[int]]:
    seen: dict[str, set[int]] = defaultdict(set)
    for gpu, _, source in log:
        seen[source].add(gpu)
    return seen


def answered_once(result: EvalResult, req: EvalRequest) -> bool:
    return [c.candidate_id for c in result.candidates] == [c.id for c in req.candidates]


def test_a_kernel_stays_on_one_gpu_and_kernels_spread_over_all() -> None:
    log: Log = []
    fakes = gpus(3, log, delay_s=0.05)
    results = run_kernels(scheduler(fakes), kernels=6, batches=4)
    per_kernel = lanes_per_kernel(log)
    assert len(per_kernel) == 6 and all(len(lanes) == 1 for lanes in per_kernel.values())
    assert {gpu for gpu, _, _ in log} == {0, 1, 2}  # every GPU got kernels
    assert not any(f.overlapped for f in fakes)  # one request per GPU at a time
    assert len(results) == 24
    for rid, result in results.items():
        k, b = (int(x[1:]) for x in rid.split("-"))
        assert answered_once(result, request(k, b))
        assert all(c.status is Status.OK and c.speedup == pytest.approx(2.0) for c in result.candidates)
        assert (
            result.device is not None and {result.device.index} == per_kernel[request(k, b).baseline.source]
        )


def test_affinity_key_is_the_kernel_and_how_it_is_measured() -> None:
    assert affinity_key(request(1, 0)) == affinity_key(request(1, 5, candidates=1))
    assert affinity_key(request(1, 0)) != affinity_key(request(2, 0))
    assert affinity_key(request(1, 0)) != affinity_key(replace(request(1, 0), seeds=(9,)))


def test_a_failed_gpus_request_runs_again_whole_on_another() -> None:
    log: Log = []
    fakes = gpus(3, log, delay_s=0.02)
    fakes[1].fail_at = 2  # GPU 1 is lost at its second request
    ex = scheduler(fakes)
    results = run_kernels(ex, kernels=6, batches=3)
    assert len(results) == 18
    for rid, result in results.items():  # every candidate answered exactly once, all verified
        k, b = (int(x[1:]) for x in rid.split("-"))
        assert answered_once(result, request(k, b))
        assert all(c.status is Status.OK for c in (result.baseline, *result.candidates))
    failed = [rid for gpu, rid, _ in log if gpu == 1][1]  # the request GPU 1 held when it failed
    reruns = [gpu for gpu, rid, _ in log if rid == failed]
    assert reruns[0] == 1 and len(reruns) == 2 and reruns[1] != 1  # run again, once, elsewhere
    assert results[failed].device is not None and results[failed].device.index == reruns[1]
    assert [gpu for gpu, _, _ in log].count(1) == 2  # nothing more went to GPU 1
    moved = {src for gpu, _, src in log if gpu == 1}
    # GPU 1's kernels moved, each to one other GPU; the others never moved
    for src, lanes in lanes_per_kernel(log).items():
        assert len(lanes) == (2 if src in moved else 1) and (src not in moved or 1 in lanes)
    assert gpu_count(ex) == 2


def test_a_request_whose_retry_fails_too_is_reported_naming_both_gpus() -> None:
    log: Log = []
    fakes = gpus(3, log)
    fakes[0].fail_at = fakes[1].fail_at = 1
    ex = scheduler(fakes)
    req = request(0, 0)
    result = ex.evaluate(req)
    assert answered_once(result, req)
    for c in (result.baseline, *result.candidates):
        assert c.status is Status.CRASH
        assert c.message == (
            "GPU 0 failed: CUDA_ERROR_DEVICE_UNAVAILABLE on fake GPU 0; requeued, "
            "GPU 1 failed: CUDA_ERROR_DEVICE_UNAVAILABLE on fake GPU 1"
        )
    again = ex.evaluate(request(0, 1))  # the run goes on on the GPU left
    assert again.device is not None and again.device.index == 2
    assert all(c.status is Status.OK for c in again.candidates)
    fakes[2].fail_at = 1
    with pytest.raises(WorkerUnavailable, match=r"every GPU failed: GPU 0: .*; GPU 1: .*; GPU 2: "):
        ex.evaluate(request(0, 2))


def test_no_gpu_anywhere_is_the_no_gpu_error() -> None:
    log: Log = []
    ex = scheduler(gpus(2, log, fail_at=1, error=NoGpuError))
    with pytest.raises(NoGpuError, match=r"GPU 0: .*; GPU 1: "):
        ex.evaluate(request(0, 0))


def test_sessions_pin_and_spread_and_record_their_gpus() -> None:
    log: Log = []
    ex = scheduler(gpus(2, log))
    a, b = ex.session(), ex.session()
    for k in range(3):  # different kernels through one session: one GPU
        a.evaluate(request(k, 0))
        b.evaluate(request(10 + k, 0))
    assert len(a.gpus) == 1 and len(b.gpus) == 1 and a.gpus != b.gpus
    assert (a.device_info().index,) == a.gpus and (b.device_info().index,) == b.gpus
    a.close()
    c = ex.session()  # a's GPU is free again
    c.evaluate(request(20, 0))
    assert c.gpus == a.gpus
    plain = session(FakeGpu(7, log))  # any executor: used as it is, GPUs recorded
    plain.evaluate(request(0, 0))
    assert plain.gpus == (7,) and gpu_count(FakeGpu(0, log)) == 1


def test_cancel_while_waiting_for_a_busy_gpu() -> None:
    log: Log = []
    ex = scheduler(gpus(1, log, delay_s=1.0))
    cancel = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(ex.evaluate, request(0, 0))
        poll_until(lambda: log, 10, "the first request to start on the GPU")
        second = pool.submit(ex.evaluate, request(0, 1), cancel=cancel)
        poll_until(lambda: ex.lanes[0].queued == 2, 10, "the second request to wait for the GPU")
        cancel.set()
        waited = second.result(timeout=0.5)  # answered long before the GPU is free
        assert not first.done()
    assert all(c.status is Status.CANCELLED for c in waited.candidates)
    assert waited.candidates[0].message == "cancelled while waiting for a GPU"
    assert [rid for _, rid, _ in log] == ["k0-b0"]


def test_parse_gpus() -> None:
    assert parse_gpus("0,1,3") == (0, 1, 3)
    for bad, why in (("0,x", "comma-separated"), ("0,0", "twice"), ("-1", "0 or more")):
        with pytest.raises(GpuListError, match=why):
            parse_gpus(bad)
    assert parse_gpus("all")  # at least GPU 0, whatever the machine has


# ----------------------------------------------------------------------- real worker processes


@pytest.fixture
def two_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GpuScheduler]:
    """Two fake GPUs, each a real LocalExecutor with its own worker process (LostGpuHandler)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    lanes = [
        Lane(LocalExecutor((d,), handler="sandbox_fakes:LostGpuHandler", sandbox=False, compile_workers=1), d)
        for d in (0, 1)
    ]
    ex = GpuScheduler(lanes)
    yield ex
    ex.close()


def test_killed_gpu_worker_its_request_is_requeued_on_the_other_gpu(
    two_workers: GpuScheduler, data_dir: Path
) -> None:
    vadd = kernel_file(data_dir / "sandbox" / "vadd.cu", "vadd")
    sessions = [two_workers.session(), two_workers.session()]
    for s in sessions:
        s.evaluate(vadd_request(vadd, (), request_id="probe"))
    (on_gpu1,) = [s for s in sessions if s.gpus == (1,)]
    # through the session on GPU 1: a request whose second candidate kills the worker and the GPU
    cands = tuple(Candidate(cid, vadd) for cid in ("ok1", "lose", "ok2"))
    result = on_gpu1.evaluate(vadd_request(vadd, cands, request_id="lost"))
    assert on_gpu1.gpus == (1, 0)
    assert result.device is not None and result.device.index == 0  # run again, whole, on GPU 0
    assert [c.candidate_id for c in result.candidates] == ["ok1", "lose", "ok2"]
    assert all(c.status is Status.OK for c in (result.baseline, *result.candidates))
    pids = {c.message for c in result.candidates}
    assert len(pids) == 1  # one worker (GPU 0's) answered the whole request
    assert two_workers.gpu_count() == 1 and "GPU 1 fell off the bus" in two_workers.lanes[1].failure


def test_worker_crash_is_a_verdict_on_its_candidate_not_a_lost_gpu(
    two_workers: GpuScheduler, data_dir: Path
) -> None:
    vadd = kernel_file(data_dir / "sandbox" / "vadd.cu", "vadd")
    cands = tuple(Candidate(cid, vadd) for cid in ("ok1", "crash", "ok2"))
    result = two_workers.evaluate(vadd_request(vadd, cands, request_id="crashy"))
    assert [c.status for c in result.candidates] == [Status.OK, Status.CRASH, Status.OK]
    assert "worker died" in result.candidates[1].message
    assert two_workers.gpu_count() == 2


# ----------------------------------------------------------------------- the suite


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in SUITE:
        shutil.copy(KERNELS / name, tmp_path / name)
    return tmp_path


def suite_on(folder: Path, n: int, log: Log) -> tuple[float, list[dict[str, object]]]:
    fakes = gpus(n, log, delay_s=0.2)
    with scheduler(fakes) as ex:
        started = time.monotonic()
        entries = run_suite(folder, ex, budget=parse_budget("3c"), seed=1)
        wall = time.monotonic() - started
    assert not any(f.overlapped for f in fakes)
    return wall, [asdict(e) for e in entries]


def verdicts(entries: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in e.items() if k not in ("seconds", "baseline_seconds", "gpus")} for e in entries]


def test_suite_on_three_gpus_same_verdicts_one_gpu_per_kernel_and_faster(folder: Path) -> None:
    one_log: Log = []
    three_log: Log = []
    one_wall, one = suite_on(folder, 1, one_log)
    three_wall, three = suite_on(folder, 3, three_log)
    assert len(one) == len(SUITE) and verdicts(one) == verdicts(three)
    assert all(e["status"] == "improved" for e in one)
    assert all(len(lanes) == 1 for lanes in lanes_per_kernel(three_log).values())  # no kernel on two GPUs
    assert {g for e in three for g in e["gpus"]} == {0, 1, 2}  # type: ignore[attr-defined]
    assert all(len(e["gpus"]) == 1 for e in three)  # type: ignore[arg-type]
    assert len(one_log) == len(three_log)  # the same requests, spread
    assert three_wall < 0.6 * one_wall, (one_wall, three_wall)


@pytest.mark.slow  # three CLI runs; the default run has the in-process suite on three GPUs and the flags' errors
def test_suite_cli_with_gpus(folder: Path) -> None:
    three = run_cli("suite", str(folder), "--budget", "2c", "--json", "--gpus", "0,1,2")
    one = run_cli("suite", str(folder), "--budget", "2c", "--json", "--gpu", "0")
    assert three.returncode == 0 and one.returncode == 0, three.stderr + one.stderr
    a, b = json.loads(one.stdout), json.loads(three.stdout)
    assert verdicts(a["kernels"]) == verdicts(b["kernels"])
    assert a["gpus"] == [0] and b["gpus"] == [0, 1, 2]
    assert all(len(k["gpus"]) == 1 for k in b["kernels"])
    progress = [line for line in three.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == len(SUITE) and all(" on GPU " in line for line in progress)
    table = run_cli("suite", str(folder), "--budget", "1c", "--gpus", "0,1")
    assert table.returncode == 0, table.stderr
    assert "(GPUs 0,1)" in table.stdout.splitlines()[0] and table.stdout.splitlines()[1].split()[-2:] == [
        "gpu",
        "ceiling",
    ]


@pytest.mark.parametrize(
    "args, needle",
    [
        (("--gpus", "0,x"), "--gpus 0,x: expected comma-separated GPU indices"),
        (("--gpus", "1,1"), "a GPU is listed twice"),
        (("--gpu", "0", "--gpus", "0,1"), "give --gpu or --gpus, not both"),
    ],
)
def test_suite_cli_gpu_mistakes(folder: Path, args: tuple[str, ...], needle: str) -> None:
    out = run_cli("suite", str(folder), *args)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and needle in out.stderr


def test_editor_setting_gpus() -> None:
    from sandbox.executors import ExecutorSettings, make_executor
    from server.settings import parse_settings

    settings, problems = parse_settings({"executor": {"kind": "test", "gpus": [2, 0, 2]}}, env={})
    assert settings.executor.gpus == (2, 0) and not problems
    with make_executor(settings.executor) as ex:
        assert isinstance(ex, GpuScheduler) and [lane.index for lane in ex.lanes] == [2, 0]
        result = ex.evaluate(request(0, 0))
        assert result.device is not None and result.device.index in (0, 2)
    assert not isinstance(make_executor(ExecutorSettings(kind="test", gpus=(1,))), GpuScheduler)
    _, problems = parse_settings({"executor": {"gpus": [0, -1]}}, env={})
    assert problems == ("executor.gpus: expected a list of GPU indices, got [0, -1]",)


def test_sessions_and_recent_kernels_count_once_towards_load() -> None:
    log: Log = []
    ex = scheduler(gpus(3, log))
    s = ex.session()
    s.evaluate(request(0, 0))
    ex.evaluate(request(1, 0))  # a kernel run without a session: the next free GPU
    third = ex.session()  # the one GPU with neither
    third.evaluate(request(2, 0))
    assert {s.gpus[0], third.gpus[0], log[1][0]} == {0, 1, 2}
