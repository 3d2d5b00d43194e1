"""RayExecutor against a local Ray instance on the CPU (tasks need no GPU here): an injected
evaluation runs as a Ray generator task, streams progress, and sees the caller's cancel."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from test_remote import make_request
from test_scheduler import request

from sandbox.contract import EvalRequest, EvalResult, Progress, Status
from sandbox.executor import ExecutorError, ProgressFn, WorkerUnavailable
from sandbox.remote import RayExecutor
from sandbox.testing import FakeExecutor

ray = pytest.importorskip("ray", reason="Ray is not installed (extra `cluster`)")
pytestmark = pytest.mark.slow  # a local Ray instance starts for these


class FakeEvaluation:
    """A picklable evaluation for the Ray task: the sandbox's fake executor (``delay_s`` per
    candidate); touches ``started`` when it begins and writes ``marker`` when a cancel reached it (the task runs in another process)."""

    def __init__(
        self,
        delay_s: float = 0.0,
        marker: Path | None = None,
        started: Path | None = None,
        fail: str = "",
        die_once: Path | None = None,
    ) -> None:
        self.delay_s = delay_s
        self.marker = marker
        self.started = started
        self.fail = fail
        self.die_once = (
            die_once  # the first actor to evaluate a request named "die..." dies (writing this file)
        )

    def __call__(self, request: EvalRequest, progress: ProgressFn, cancel: threading.Event) -> EvalResult:
        if self.started is not None:
            self.started.write_text(request.id)
        if self.die_once is not None and request.id.startswith("die"):
            try:
                os.close(os.open(self.die_once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os._exit(1)
        if self.fail:
            raise ExecutorError(self.fail)
        result = FakeExecutor(delay_s=self.delay_s).evaluate(request, progress=progress, cancel=cancel)
        cancelled = [c.candidate_id for c in result.candidates if c.status is Status.CANCELLED]
        if self.marker is not None and cancelled:
            self.marker.write_text(f"cancelled {request.id}: {' '.join(cancelled)}")
        return result


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    tests = str(Path(__file__).parent)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": tests}},  # task processes import this module
    )
    yield
    ray.shutdown()


def test_ray_task_streams_progress_and_returns_the_result(local_ray: None) -> None:
    executor = RayExecutor(num_gpus=0, num_cpus=0, evaluate=FakeEvaluation())
    request = make_request("ray-1", candidates=3)
    seen: list[Progress] = []
    result = executor.evaluate(request, progress=seen.append)
    assert [p.done for p in seen] == [1, 2, 3]
    assert result.request_id == "ray-1"
    assert [round(c.speedup, 6) for c in result.candidates] == [2.0, 1.0, 2.0]


def test_ray_spreads_concurrent_evaluations(local_ray: None) -> None:
    executor = RayExecutor(num_gpus=0, num_cpus=0, evaluate=FakeEvaluation(delay_s=0.05))
    requests = [make_request(f"ray-many-{i}", candidates=2) for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(executor.evaluate, requests))
    assert [r.request_id for r in results] == [r.id for r in requests]
    assert all(c.status is Status.OK for r in results for c in r.candidates)


def test_ray_cancel_reaches_the_task(local_ray: None, tmp_path: Path) -> None:
    started, marker = tmp_path / "started", tmp_path / "cancelled"
    executor = RayExecutor(
        num_gpus=0, num_cpus=0, evaluate=FakeEvaluation(delay_s=30.0, marker=marker, started=started)
    )
    cancel = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(executor.evaluate, make_request("ray-cancel"), cancel=cancel)
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline, "the Ray task never started"
            time.sleep(0.05)
        cancel.set()
        result = future.result(timeout=30)
    assert [c.status for c in result.candidates] == [Status.CANCELLED] * 3
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "the cancel never reached the evaluation in the Ray task"
        time.sleep(0.05)
    assert marker.read_text() == "cancelled ray-cancel: c0 c1 c2"


def test_ray_evaluation_failure_is_one_clear_error(local_ray: None) -> None:
    executor = RayExecutor(
        num_gpus=0, num_cpus=0, evaluate=FakeEvaluation(fail="no GPU: CUDA reports 0 devices")
    )
    with pytest.raises(
        WorkerUnavailable, match="Ray task for ray-fail failed: no GPU: CUDA reports 0 devices"
    ):
        executor.evaluate(make_request("ray-fail"))


def test_ray_one_actor_per_gpu_kernels_pinned_and_a_dead_actor_requeued(
    local_ray: None, tmp_path: Path
) -> None:
    """Three actors (fake GPUs): each kernel's requests stay on one actor, kernels spread over
    all three; an actor that dies mid-request has the request run again on another."""
    executor = RayExecutor(
        num_gpus=0, num_cpus=0, gpus=3, evaluate=FakeEvaluation(delay_s=0.05, die_once=tmp_path / "died")
    )
    try:
        assert executor.gpu_count() == 3 and [lane.index for lane in executor.lanes] == [0, 1, 2]

        def client(k: int) -> set[int]:
            results = [executor.evaluate(request(k, b, candidates=2)) for b in range(3)]
            assert all(c.status is Status.OK for r in results for c in r.candidates)
            return {r.device.index for r in results if r.device is not None}

        with ThreadPoolExecutor(3) as pool:
            placed = list(pool.map(client, range(3)))
        assert all(len(p) == 1 for p in placed) and set().union(*placed) == {0, 1, 2}
        doomed = replace(request(0, 9, candidates=2), id="die-now")
        result = executor.evaluate(doomed)
        assert (tmp_path / "died").exists()
        assert [c.candidate_id for c in result.candidates] == [c.id for c in doomed.candidates]
        assert all(c.status is Status.OK for c in result.candidates)
        assert executor.gpu_count() == 2
        assert result.device is not None and result.device.index != placed[0].pop()
        (dead,) = [lane for lane in executor.lanes if lane.failure]
        assert "died" in dead.failure or "failed" in dead.failure
    finally:
        executor.close()
