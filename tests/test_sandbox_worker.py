"""Worker lifecycle without a GPU: real worker processes running scripted handlers, real NVRTC
compiles in the CPU pool.  Hangs are killed at their deadline with their whole process group,
crashes and sticky errors restart the worker, and every candidate gets a result."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from polling import poll_until, set_when
from sandbox_fakes import HANGING_SANITIZER, fake_sanitizer, kernel_file, vadd_request

from sandbox.contract import (
    Budget,
    Candidate,
    CandidateResult,
    EvalOptions,
    EvalResult,
    KernelSource,
    Launch,
    Progress,
    Status,
)
from sandbox.executor import NoGpuError
from sandbox.isolation import bwrap_prefix, clean_env
from sandbox.local import LocalExecutor
from sandbox.process import WorkerProcess
from sandbox.wire import Binary, EvalJob, Job, Reply

SCRIPTED = "sandbox_fakes:ScriptedHandler"


@pytest.fixture
def executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalExecutor]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ex = LocalExecutor(handler=SCRIPTED, sandbox=False, compile_workers=2)
    yield ex
    ex.close()


@pytest.fixture
def vadd(data_dir: Path) -> KernelSource:
    return kernel_file(data_dir / "sandbox" / "vadd.cu", "vadd")


def evaluate(
    ex: LocalExecutor, vadd: KernelSource, ids: list[str], request_id: str, **kw: object
) -> EvalResult:
    cands = tuple(Candidate(cid, vadd) for cid in ids)
    return ex.evaluate(vadd_request(vadd, cands, request_id=request_id), **kw)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    """Running (a killed process whose parent died may linger as a zombie until reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def sleepers(arg: bytes) -> list[int]:
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and cmdline(p) == b"sleep\x00" + arg + b"\x00" and alive(int(p.name))
    ]


def pid_of(message: str) -> int:
    return int(message.split()[-1])


@pytest.mark.slow
def test_hang_is_killed_with_its_process_group_and_worker_serves_on(
    executor: LocalExecutor, vadd: KernelSource, tmp_path: Path
) -> None:
    marker = tmp_path / "grandchild.pid"
    cands = tuple(Candidate(cid, vadd) for cid in ("ok1", "hang", "ok2"))
    request = vadd_request(vadd, cands, budget=Budget(timeout_s=3.0), request_id=str(marker))
    start = time.monotonic()
    result = executor.evaluate(request)
    statuses = [c.status for c in result.candidates]
    assert statuses == [Status.OK, Status.TIMEOUT, Status.OK]
    assert "deadline" in result.candidates[1].message
    assert time.monotonic() - start < 30
    grandchild = int(marker.read_text())
    # the hung job's own child went down with the process group
    poll_until(lambda: not alive(grandchild), 10, f"the hung job's child {grandchild} to end")
    assert pid_of(result.candidates[0].message) != pid_of(result.candidates[2].message)


def test_crash_and_sticky_error_restart_the_worker(executor: LocalExecutor, vadd: KernelSource) -> None:
    result = evaluate(executor, vadd, ["ok1", "crash", "ok2", "sticky", "ok3"], "r1")
    assert [c.status for c in result.candidates] == [
        Status.OK,
        Status.CRASH,
        Status.OK,
        Status.CRASH,
        Status.OK,
    ]
    assert "exit status 9" in result.candidates[1].message
    pids = [pid_of(result.candidates[i].message) for i in (0, 2, 4)]
    assert len(set(pids)) == 3  # a fresh worker after each crash
    assert result.baseline.status == Status.OK
    assert result.device is not None and result.device.peak_bandwidth_gbps == 1000.0


def test_compile_errors_and_static_rejections_never_reach_the_worker(
    executor: LocalExecutor, vadd: KernelSource
) -> None:
    broken = KernelSource(vadd.source.replace("c[i] = a[i] + b[i];", "c[i] = a[i] + ;"), "vadd")
    rdc = KernelSource(vadd.source, "vadd", options=("-rdc=true",))
    cands = (Candidate("broken", broken), Candidate("rdc", rdc), Candidate("hang", vadd))
    request = vadd_request(vadd, cands, budget=Budget(timeout_s=2.0))
    result = executor.evaluate(request)
    b, r, h = result.candidates
    assert b.status == Status.COMPILE_ERROR and "line 6" in b.message and "error" in b.compile_log
    assert r.status == Status.REJECTED and "-rdc" in r.message
    assert h.status == Status.TIMEOUT


def test_baseline_compile_error_cancels_candidates(executor: LocalExecutor, vadd: KernelSource) -> None:
    broken = KernelSource("__global__ void vadd(float* x) { x[0] = ; }", "vadd")
    request = vadd_request(broken, (Candidate("ok1", vadd),))
    result = executor.evaluate(request)
    assert result.baseline.status == Status.COMPILE_ERROR
    assert result.candidates[0].status == Status.CANCELLED


def test_progress_and_cancel(executor: LocalExecutor, vadd: KernelSource) -> None:
    cancel = threading.Event()
    seen: list[Progress] = []

    def on_progress(p: Progress) -> None:
        seen.append(p)
        if p.done == 2:
            cancel.set()

    result = evaluate(executor, vadd, ["ok1", "ok2", "ok3"], "r2", progress=on_progress, cancel=cancel)
    assert [c.status for c in result.candidates] == [Status.OK, Status.CANCELLED, Status.CANCELLED]
    assert [p.done for p in seen] == [1, 2, 3, 4] and seen[-1].total == 4


def test_cancel_stops_a_running_candidate(
    executor: LocalExecutor, vadd: KernelSource, tmp_path: Path
) -> None:
    cancel = threading.Event()

    marker = tmp_path / "pid"  # the hanging candidate writes its child's pid there once it runs

    def on_progress(p: Progress) -> None:
        if p.done == 1:  # baseline done: cancel once the hanging candidate runs
            set_when(marker.exists, cancel)

    cands = tuple(Candidate(cid, vadd) for cid in ("hang", "ok1"))
    request = vadd_request(vadd, cands, budget=Budget(timeout_s=60.0), request_id=str(marker))
    start = time.monotonic()
    result = executor.evaluate(request, progress=on_progress, cancel=cancel)
    assert [c.status for c in result.candidates] == [Status.CANCELLED, Status.CANCELLED]
    assert time.monotonic() - start < 20


@pytest.mark.skipif(not bwrap_prefix(), reason="bubblewrap (bwrap) is not installed or not usable here")
def test_bwrap_worker_has_no_network_and_is_still_killed_at_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vadd: KernelSource
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = set(sleepers(b"600"))  # other test runs on this machine may have their own
    with LocalExecutor(handler=SCRIPTED, sandbox=True, compile_workers=1) as ex:
        assert ex.sandboxed
        cands = tuple(Candidate(cid, vadd) for cid in ("net", "hang", "ok1"))
        request = vadd_request(vadd, cands, budget=Budget(timeout_s=3.0), request_id="/tmp/invisible")
        net, hang, ok = ex.evaluate(request).candidates
    assert net.message == "interfaces lo"
    assert hang.status == Status.TIMEOUT and ok.status == Status.OK
    # the pid namespace's processes die with it, not instantly on a busy host
    poll_until(lambda: set(sleepers(b"600")) <= before, 5, "the sandbox's hanging processes to end")


FAKE_SANITIZER = """#!/bin/sh
# Stands in for compute-sanitizer: runs the worker, then reports {errors} errors in its log.
while [ $# -gt 0 ]; do
  case "$1" in
    --log-file) log="$2"; shift 2 ;;
    --tool|--error-exitcode) shift 2 ;;
    *) break ;;
  esac
done
"$@"
code=$?
echo "========= ERROR SUMMARY: {errors} errors" > "$log"
[ {errors} -eq 0 ] && exit $code
echo "========= Invalid __global__ write of size 4 bytes" >> "$log"
exit 86
"""


@pytest.mark.parametrize("errors", [0, 1])
def test_sanitizer_runs_on_ok_candidates(
    executor: LocalExecutor, vadd: KernelSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errors: int
) -> None:
    tools = fake_sanitizer(tmp_path, FAKE_SANITIZER.format(errors=errors))
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    request = replace(
        vadd_request(vadd, (Candidate("ok1", vadd),), request_id=f"san{errors}"),
        options=EvalOptions(sanitize=True),
    )
    (result,) = executor.evaluate(request).candidates
    assert f"memcheck: ERROR SUMMARY: {errors} errors" in result.sanitizer
    if errors:
        assert result.status == Status.REJECTED and "Invalid __global__ write" in result.message
    else:
        assert result.status == Status.OK and "racecheck" in result.sanitizer


def test_ceilings_measured_once_and_cached(executor: LocalExecutor, tmp_path: Path) -> None:
    info = executor.device_info()
    assert info.name == "Fake GPU" and info.peak_gflops == 500.0
    assert (tmp_path / "cache" / "cuda-agent" / "ceilings.json").exists()


def test_no_gpu_is_an_executor_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with (
        LocalExecutor(handler="sandbox_fakes:NoGpuHandler", sandbox=False, compile_workers=1) as ex,
        pytest.raises(NoGpuError, match="CUDA driver not found"),
    ):
        ex.device_info()


def test_worker_runs_in_its_own_session_with_a_clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "x")
    env = clean_env()
    assert "SECRET_TOKEN" not in env and "PYTHONPATH" in env
    w = WorkerProcess(handler=SCRIPTED)
    w.start()
    try:
        assert w.proc is not None
        assert os.getpgid(w.proc.pid) == w.proc.pid != os.getpgid(0)
    finally:
        assert w.close() == 0


def test_timing_slots_shrink_to_fit_the_memory_cap_and_for_large_problems() -> None:
    from sandbox.contract import ArgSpec, Launch, Problem
    from sandbox.gpu_handler import TIMING_SLOTS, timing_slots

    def problem(n: int) -> Problem:  # three float arrays of n elements, shared by baseline and candidate
        return Problem(
            f"n={n}",
            {"n": n},
            (
                ArgSpec("a", "in", "float32", n),
                ArgSpec("b", "in", "float32", n),
                ArgSpec("c", "out", "float32", n),
                ArgSpec("n", "scalar", "int32", value=n),
            ),
            Launch((n // 256, 1, 1), (256, 1, 1)),
        )

    mid = problem(1 << 21)  # 24 MiB per input set
    assert timing_slots(mid, cap=64 << 20) == 2  # 3 sets would need 72 MiB
    assert timing_slots(mid, cap=128 << 20) == 3
    # an inout array keeps a pristine copy to restore it before every timed launch
    accumulating = replace(
        mid, args=tuple(replace(a, role="inout") if a.name == "c" else a for a in mid.args)
    )
    assert timing_slots(accumulating, cap=96 << 20) == 2
    assert timing_slots(mid, cap=0) == TIMING_SLOTS
    small = Problem("n=4", {"n": 4}, (ArgSpec("c", "out", "float32", 4),), Launch((1, 1, 1), (32, 1, 1)))
    assert timing_slots(small, cap=1 << 20) == TIMING_SLOTS
    # 768 MiB per set: two sets, whatever the cap (each set costs a draw of inputs and a reference)
    assert timing_slots(problem(1 << 26), cap=0) == timing_slots(problem(1 << 26), cap=16 << 30) == 2


def test_verification_plan_checks_the_benchmark_size_on_every_seed_unless_timed() -> None:
    from sandbox.gpu_handler import verification_plan

    timed = replace(vadd_request(KernelSource("__global__ void vadd() {}", "vadd"), ()), seeds=(5, 6, 7))
    plan = verification_plan(timed)
    assert [(p.label, seeds) for p, seeds in plan] == [
        ("n=1", (5, 6, 7)),
        ("n=4097", (5, 6, 7)),
        ("n=65536", (5,)),  # the timed runs use seeds 6 and 7 and check against the baseline's outputs
    ]
    untimed = replace(timed, options=EvalOptions(time=False))
    assert [seeds for _, seeds in verification_plan(untimed)] == [(5, 6, 7)] * 3
    # inout arrays are restored before every timed launch, so the timed runs re-check them too
    c_inout = tuple(replace(a, role="inout") if a.name == "c" else a for a in timed.bench_problem.args)
    accumulating = replace(timed, bench_problem=replace(timed.bench_problem, args=c_inout))
    assert verification_plan(accumulating)[-1][1] == (5,)


def test_sanitizer_reruns_the_candidate_alone_on_the_verification_sizes() -> None:
    from sandbox.contract import Launch, validate_request
    from sandbox.instrumented import sanitizer_request

    kernel, fast = (
        KernelSource("__global__ void vadd() {}", "vadd"),
        KernelSource("__global__ void v2() {}", "v2"),
    )
    base = replace(vadd_request(kernel, ()), seeds=(5, 6, 7), options=EvalOptions(sanitize=True))
    launches = tuple(Launch((i + 1, 1, 1), (128, 1, 1)) for i in range(3))  # n=1, n=4097, bench
    req = replace(base, candidates=(Candidate("c0", kernel), Candidate("c1", fast, launches=launches)))
    small = sanitizer_request(req, 1)
    problems = (*small.verify_problems, small.bench_problem)
    assert [p.label for p in problems] == ["n=1", "n=4097"] and small.seeds == (5,)
    assert [p.launch for p in problems] == list(launches[:2])  # the candidate's launches there
    assert small.baseline == fast and small.candidates == ()
    assert not small.options.time and not small.options.sanitize
    validate_request(small)
    alone = sanitizer_request(replace(req, verify_problems=()), 1)  # no verification sizes
    assert alone.verify_problems == () and alone.bench_problem.launch == launches[-1]
    assert alone.bench_problem.label == req.bench_problem.label


def test_sanitizer_fails_closed() -> None:
    from sandbox.instrumented import SANITIZER_ERROR, sanitizer_verdict
    from sandbox.wire import Reply

    ok = Reply(CandidateResult("c", Status.OK))
    clean = "========= ERROR SUMMARY: 0 errors\n"
    assert sanitizer_verdict("memcheck", 0, clean, ok) == (True, "memcheck: ERROR SUMMARY: 0 errors")
    found = "========= Invalid __global__ write of size 4 bytes\n========= ERROR SUMMARY: 1 error\n"
    passed, line = sanitizer_verdict("memcheck", SANITIZER_ERROR, found, ok)
    assert not passed and "1 error" in line and "Invalid __global__ write" in line
    # the worker under the tool could not get the GPU: no result, no summary: not a pass
    no_gpu = Reply(None, unavailable="no usable GPU 0 (cupy): CUDARuntimeError: cudaErrorDevicesUnavailable")
    passed, line = sanitizer_verdict("racecheck", 1, "", no_gpu)
    assert not passed and "could not check" in line and "DevicesUnavailable" in line
    assert not sanitizer_verdict("memcheck", 0, "", ok)[0]  # ran, but said nothing
    assert not sanitizer_verdict("memcheck", 3, clean, ok)[0]  # a summary, but an odd exit status
    crashed = Reply(CandidateResult("c", Status.CRASH, "worker died"))
    assert "crash: worker died" in sanitizer_verdict("memcheck", 0, clean, crashed)[1]


def test_sanitizer_missing_is_skipped_not_passed(
    executor: LocalExecutor, vadd: KernelSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    request = replace(vadd_request(vadd, (Candidate("ok1", vadd),)), options=EvalOptions(sanitize=True))
    (result,) = executor.evaluate(request).candidates
    assert result.status == Status.OK and result.sanitizer.startswith("skipped: ")


def test_cancel_stops_compute_sanitizer(
    executor: LocalExecutor, vadd: KernelSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deadline (the suite's per-kernel one) must reach a compute-sanitizer run too: cancelled, it
    comes back at once, `cancelled`, with the sanitizer `skipped`, never `passed`."""
    monkeypatch.setenv(
        "PATH", f"{fake_sanitizer(tmp_path, HANGING_SANITIZER)}{os.pathsep}{os.environ['PATH']}"
    )
    cancel = threading.Event()
    before = set(sleepers(b"601"))

    def on_progress(p: Progress) -> None:
        if p.done == 1:  # baseline done: the candidate answers at once, then the sanitizer hangs
            set_when(sanitizer_hangs, cancel)

    def sanitizer_hangs() -> bool:
        return bool(set(sleepers(b"601")) - before)

    request = replace(
        vadd_request(vadd, (Candidate("ok1", vadd),), request_id="san-cancel"),
        options=EvalOptions(sanitize=True),
    )
    start = time.monotonic()
    (result,) = executor.evaluate(request, progress=on_progress, cancel=cancel).candidates
    assert time.monotonic() - start < 15
    assert result.status == Status.CANCELLED and result.sanitizer.startswith("skipped: cancelled")
    poll_until(lambda: set(sleepers(b"601")) <= before, 10, "the sanitizer's process group to be killed")


PARENT = """
import sys, time
from sandbox.process import WorkerProcess
from sandbox.wire import EvalJob, Binary, encode
from sandbox_fakes import HANGING_SANITIZER, fake_sanitizer, kernel_file, vadd_request
from sandbox.contract import Candidate
from pathlib import Path
vadd = kernel_file(Path(sys.argv[1]), "vadd")
w = WorkerProcess(handler="sandbox_fakes:ScriptedHandler")
w.start()
print(w.proc.pid, flush=True)
w.conn.send_bytes(encode(EvalJob(vadd_request(vadd, (Candidate("hang", vadd),), request_id=sys.argv[2]), Binary(b"", "vadd"), 0)))
time.sleep(600)
"""


def test_worker_exits_quietly_when_its_parent_is_killed(data_dir: Path, tmp_path: Path) -> None:
    """A killed optimizer leaves no worker behind, and no traceback on the terminal."""
    import signal
    import subprocess
    import sys

    marker = tmp_path / "grandchild.pid"
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(data_dir / "sandbox" / "vadd.cu"), str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(Path(__file__).parent.parent),
    )
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())

    def written() -> str:  # the job is running once the grandchild's pid is written in full
        text = marker.read_text() if marker.exists() else ""
        return text if text.strip().isdigit() else ""

    poll_until(written, 30, "the job's grandchild to start")
    grandchild = int(written())
    parent.send_signal(signal.SIGKILL)
    _, err = parent.communicate(timeout=30)  # returns once the worker, holding stderr too, is gone
    poll_until(lambda: not alive(worker) and not alive(grandchild), 30, "the worker and its child to end")
    assert b"Traceback" not in err and b"Error" not in err, err.decode(errors="replace")


def test_no_gpu_text_names_the_cause() -> None:
    from sandbox.child import no_gpu_text

    missing = ModuleNotFoundError("No module named 'cupy'", name="cupy")
    text = no_gpu_text(missing, 0, "cupy")
    assert "cupy is not installed in this Python" in text and "cuda-agent[" not in text  # on no index
    insufficient = RuntimeError(
        "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"
    )
    # CUDA says "insufficient" also where there is no driver at all: only a driver can be too old
    old = no_gpu_text(insufficient, 0, "cupy", driver=True)
    assert "the NVIDIA driver is older than the CUDA this CuPy was built for" in old
    absent = no_gpu_text(insufficient, 0, "cupy", driver=False)
    assert absent.startswith("no usable GPU 0 (cupy): no NVIDIA driver on this machine (no libcuda.so.1")
    assert "older" not in absent and "insufficient for CUDA runtime" in absent  # the raw error follows
    no_lib = no_gpu_text(
        RuntimeError("libcuda.so.1: cannot open shared object file"), 1, "cupy", driver=False
    )
    assert (
        no_lib.startswith("no usable GPU 1 (cupy): no NVIDIA driver on this machine") and "libcuda" in no_lib
    )
    no_device = RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    assert "the NVIDIA driver finds no GPU" in no_gpu_text(no_device, 0, "cupy", driver=True)
    other = no_gpu_text(
        RuntimeError("cudaErrorInvalidDevice: invalid device ordinal"), 3, "cupy", driver=True
    )
    assert other.startswith(
        "no usable GPU 3 (cupy): GPU 3 cannot be used; RuntimeError: cudaErrorInvalidDevice"
    )


def test_a_driver_is_found_by_its_device_nodes_or_its_library(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    from sandbox import child

    def no_library(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    monkeypatch.setattr(child.os.path, "exists", lambda p: False)
    monkeypatch.setattr(child.os, "listdir", lambda d: ["null", "nvme0", "nvidia-uvm"])
    assert child.nvidia_driver_present() is False
    monkeypatch.setattr(child.os, "listdir", lambda d: ["null", "nvidia0"])
    assert child.nvidia_driver_present() is True
    monkeypatch.setattr(child.os, "listdir", lambda d: ["null"])
    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())  # the library loads
    assert child.nvidia_driver_present() is True


def test_compute_sanitizer_checks_the_candidate_alone_at_its_own_launches(
    vadd: KernelSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the tools the candidate runs against itself (the original's runs, instrumented, would
    only add their time: a slow naive kernel under racecheck takes minutes), on the verification
    sizes with the candidate's launches, on the first seed."""
    from sandbox import instrumented

    jobs: list[Job] = []

    class Recording:  # stands in for the worker process started under each tool
        def __init__(self, device: int, backend: str, handler: str, prefix: list[str]) -> None:
            self.log = Path(prefix[prefix.index("--log-file") + 1])

        def start(self) -> None:
            pass

        def call(self, job: Job, timeout: float, cancel: threading.Event | None = None) -> Reply:
            jobs.append(job)
            self.log.write_text("========= ERROR SUMMARY: 0 errors\n")
            return Reply(CandidateResult("baseline", Status.OK, "verified (not timed)"))

        def close(self, timeout: float = 5.0) -> int:
            return 0

    monkeypatch.setattr(instrumented, "WorkerProcess", Recording)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/compute-sanitizer")
    wide = Launch((64, 1, 1), (1024, 1, 1))
    candidate = Candidate("c1", replace(vadd, source=vadd.source + "\n// rewritten\n"), (wide, wide, wide))
    request = replace(vadd_request(vadd, (candidate,)), seeds=(5, 6, 7))
    job = EvalJob(request, Binary(b"base", "vadd"), 0, Binary(b"cand", "vadd_c"))
    parent = SimpleNamespace(device=0, backend="cupy", handler="sandbox_fakes:ScriptedHandler", prefix=())
    out = instrumented.sanitize(cast(WorkerProcess, parent), job, CandidateResult("c1", Status.OK), Budget())
    assert out.status is Status.OK and out.sanitizer.startswith("passed: memcheck")
    assert len(jobs) == len(instrumented.SANITIZER_TOOLS)
    for j in jobs:
        assert isinstance(j, EvalJob) and j.index == -1 and j.baseline == Binary(b"cand", "vadd_c")
        assert j.request.baseline == candidate.kernel and j.request.candidates == ()
        problems = (*j.request.verify_problems, j.request.bench_problem)
        assert [p.label for p in problems] == ["n=1", "n=4097"] and j.request.seeds == (5,)
        assert all(p.launch == wide for p in problems) and not j.request.options.time
