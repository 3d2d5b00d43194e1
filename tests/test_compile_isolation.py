"""Issue 28's attacks on the compile path, on loopback and CPU only: a steered Thrust include that
would read a host file, deep nesting that overflows NVRTC's stack, compile bombs.

Two lines of defence are tested apart: the include scan (:mod:`sandbox.boundary`, everywhere)
and the isolation of compile workers (:mod:`sandbox.confine`'s Landlock, where this kernel has
it; those tests skip with the reason elsewhere).  Then end to end, where both hold: the compile
pool, ``cuda-agent worker --simulate`` and the LLM's ``compile`` tool; no reply carries a byte of
the planted secret or of the token."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from scripted_llm import Call, Say, ScriptedLLM
from simulated_worker import simulated_worker
from test_llm import last, run, settings
from test_remote import make_request

from sandbox.boundary import check_options, check_untrusted
from sandbox.compile_pool import CompilePool, compile_isolation
from sandbox.compiler import compile_cuda, cuda_include_dirs
from sandbox.confine import RESOURCE_LIMIT, CompileLimits, landlock_abi
from sandbox.contract import Candidate, KernelSource, Status, to_json
from sandbox.process import WorkerProcess
from sandbox.remote import RemoteExecutor
from sandbox.testing import FakeExecutor
from sandbox.wire import CompileJob, Reply
from server.cli.main import main

SECRET = "zz_planted_secret_5c1e"
KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n'
# Headers a request may include that reach Thrust's computed includes (found by compiling each
# with the steering macros below, trusted, on NVRTC 13 / CCCL 3).
STEERED_HEADERS = (
    "cub/agent/agent_reduce.cuh",
    "cub/agent/agent_histogram.cuh",
    "cub/agent/agent_merge_sort.cuh",
)
DEEP = "__global__ void k(int* p) { *p = " + "(" * 3000 + "1" + ")" * 3000 + "; }\n"
# ~350 bytes that expand to 10^7 tokens
BOMB = (
    "#define A0 1,1,1,1,1,1,1,1,1,1\n"
    + "".join(f"#define A{i} " + ",".join([f"A{i - 1}"] * 10) + "\n" for i in range(1, 7))
    + '__device__ int big[] = {A6};\nextern "C" __global__ void k(int* p) { *p = big[3]; }\n'
)
needs_landlock = pytest.mark.skipif(not landlock_abi(), reason="this kernel has no Landlock (Linux 5.13+)")
needs_isolation = pytest.mark.skipif(
    compile_isolation() == "none", reason="neither bubblewrap nor Landlock can isolate compiles here"
)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A host file the requests below try to read (C++ that names the secret, so a compile that
    included it would echo it in its errors)."""
    path = tmp_path / "secret.txt"
    path.write_text(f"int {SECRET} = undefined_{SECRET};\n")
    return path


def steered(header: str, target: Path) -> str:
    """A unit that makes Thrust's ``#include __THRUST_..._HEADER_INCLUDE(execution_policy.h)``,
    reached through ``header``, name ``target``."""
    up = "../" * 40 + str(target.with_suffix("")).lstrip("/")
    return f"#define execution_policy {up}\n#define h txt\n#include <{header}>\n" + KERNEL


def no_host_path(text: str) -> bool:
    return not any(d in text for d in cuda_include_dirs()) and "/tmp" not in text


# --------------------------------------------------------------------------- the include scan


@pytest.mark.parametrize("header", STEERED_HEADERS)
def test_the_scan_refuses_a_macro_thrust_builds_an_include_from(header: str, secret: Path) -> None:
    why = check_untrusted(steered(header, secret), "k.cu", (), {}, "sm_90", cuda_include_dirs())
    assert why and "#define execution_policy" in why and "computed include" in why
    assert SECRET not in why and no_host_path(why)


@pytest.mark.parametrize("option", ["-Dexecution_policy=x", "-Dh=txt", "-Usystem", "--define-macro=cpp"])
def test_an_option_cannot_define_a_steering_macro(option: str) -> None:
    from sandbox.boundary import steering_macros

    why = check_options((option,), steering=steering_macros(cuda_include_dirs()))
    assert why and "computed include" in why
    assert check_untrusted(KERNEL, "k.cu", (option,), {}, "sm_90", cuda_include_dirs()) == why


@pytest.mark.parametrize(
    "include", ["<cccl/thrust/version.h>", "<thrust/version.h>", '"cccl/thrust/detail/config.h"']
)
def test_thrust_is_refused_under_any_folder(include: str) -> None:
    why = check_untrusted(f"#include {include}\n" + KERNEL, "k.cu", (), {}, "sm_90", cuda_include_dirs())
    assert why and "Thrust is host code" in why


def test_has_include_outside_the_allowed_set_is_refused() -> None:
    dirs = cuda_include_dirs()
    probe = '#if __has_include("secret.txt")\n#endif\n' + KERNEL
    why = check_untrusted(probe, "k.cu", (), {}, "sm_90", dirs)
    assert why and "__has_include" in why and "can be tested" in why
    allowed = "#if __has_include(<cuda_fp16.h>)\n#endif\n" + KERNEL
    assert check_untrusted(allowed, "k.cu", (), {}, "sm_90", dirs) is None


def test_a_5000_character_include_name_is_refused_without_a_host_path() -> None:
    name = "a/" * 2500
    out = compile_cuda(f'#include "{name}"\n' + KERNEL)
    assert not out.result.ok and "at most 200 characters" in out.result.log
    assert len(out.result.log) < 400 and no_host_path(out.result.log)


# --------------------------------------------------------------------------- the isolation


class HostReadingCompile:
    """A compile handler that skips the include scan (trusted), to test the isolation alone."""

    def __init__(self, device: int, backend: str) -> None:
        pass

    def __call__(self, job: CompileJob) -> Reply:
        return Reply(compile_cuda(job.source, filename=job.filename, trusted=True))


@pytest.fixture
def reader() -> Iterator[WorkerProcess]:
    worker = WorkerProcess(handler="test_compile_isolation:HostReadingCompile", args=["--landlock"])
    worker.start()
    yield worker
    worker.close()


@needs_landlock
def test_a_confined_compile_worker_cannot_read_a_host_file(
    reader: WorkerProcess, secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    include_secret = CompileJob(f'#include "{secret}"\n' + KERNEL, "k.cu", (), "sm_90", (), {})
    reply = reader.call(include_secret, 60)
    assert reply.value is not None and SECRET not in reply.value.result.log
    assert "Permission denied" in reply.value.result.log
    environ = CompileJob(f'#include "/proc/{os.getpid()}/environ"\n' + KERNEL, "k.cu", (), "sm_90", (), {})
    assert "Permission denied" in reader.call(environ, 60).value.result.log
    fp16 = CompileJob("#include <cuda_fp16.h>\n" + KERNEL, "k.cu", (), "sm_90", (), {})
    assert reader.call(fp16, 60).value.result.ok  # the toolkit's headers stay readable
    unconfined = WorkerProcess(handler="test_compile_isolation:HostReadingCompile")
    try:  # the same handler without Landlock reads the file: the test can fail
        assert SECRET in unconfined.call(include_secret, 60).value.result.log
    finally:
        unconfined.close()


@needs_isolation
@pytest.mark.parametrize("header", STEERED_HEADERS)
def test_the_compile_pool_returns_no_byte_of_a_steered_host_file(header: str, secret: Path) -> None:
    pool = CompilePool(1)
    try:
        out = pool.submit(steered(header, secret)).result(timeout=120)
    finally:
        pool.close()
    assert not out.result.ok and SECRET not in to_json(out.result)


def test_the_worker_refuses_to_serve_without_isolation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sandbox.compile_pool

    monkeypatch.setattr(sandbox.compile_pool, "compile_isolation", lambda: "none")
    assert main(["worker", "--simulate", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to serve" in err and "--unsafe-no-isolation" in err and "Traceback" not in err


# --------------------------------------------------------------------------- end to end


def test_the_simulated_worker_survives_steered_includes_and_deep_nesting(
    tmp_path: Path, secret: Path
) -> None:
    """``cuda-agent worker --simulate`` compiles in the compile pool: the steered includes come back
    compile errors with no byte of the secret or the token; 3,000 nested parentheses compile."""
    token = "tok-" + SECRET[::-1]
    with simulated_worker(tmp_path, token) as worker, RemoteExecutor(worker.url, token) as remote:
        base = make_request("steer", candidates=0)
        candidates = [
            Candidate(f"steer{i}", KernelSource(steered(h, secret), "k"))
            for i, h in enumerate(STEERED_HEADERS)
        ]
        candidates.append(Candidate("cccl", KernelSource("#include <cccl/thrust/version.h>\n" + KERNEL, "k")))
        candidates.append(Candidate("deep", KernelSource(DEEP, "k")))
        from dataclasses import replace

        result = remote.evaluate(replace(base, candidates=tuple(candidates)))
        text = to_json(result)
        assert SECRET not in text and token not in text and token not in worker.log.read_text()
        statuses = {c.candidate_id: c.status for c in result.candidates}
        assert statuses == {
            "steer0": Status.COMPILE_ERROR,
            "steer1": Status.COMPILE_ERROR,
            "steer2": Status.COMPILE_ERROR,
            "cccl": Status.COMPILE_ERROR,
            "deep": Status.OK,
        }
        assert httpx.get(f"{worker.url}/health", timeout=5).json()["status"] == "ok"


def test_the_llm_compile_tool_returns_no_byte_of_a_steered_host_file(secret: Path) -> None:
    script = [Call((("compile", {"code": steered(STEERED_HEADERS[0], secret)}),)), Say("done")]
    with ScriptedLLM(script) as server:
        run(settings(server), compiler=CompilePool(workers=1))
    reply = last(server, 1)["content"]
    assert reply.startswith("Compilation failed") and SECRET not in reply


# --------------------------------------------------------------------------- resources


def test_deep_nesting_is_a_verdict_on_the_simulated_gpu_not_a_crash() -> None:
    """What killed the language server's simulated benchmark: the compile is in the pool now, and
    NVRTC has a big stack there (the same file compiles)."""
    with FakeExecutor() as fake:
        request = make_request("deep", candidates=0)
        from dataclasses import replace

        result = fake.evaluate(replace(request, candidates=(Candidate("deep", KernelSource(DEEP, "k")),)))
    assert result.candidates[0].status == Status.OK


def test_a_macro_bomb_is_a_resource_limit_verdict_and_the_next_unit_compiles() -> None:
    limits = CompileLimits(memory_bytes=1 << 30, cpu_s=10, wall_s=60)
    pool = CompilePool(1, limits=limits)
    try:
        started = time.monotonic()
        bomb = pool.submit(BOMB, name_expressions=("k",)).result(timeout=120)
        assert time.monotonic() - started < limits.wall_s
        assert not bomb.result.ok and RESOURCE_LIMIT in bomb.result.first_error()
        assert pool.submit(KERNEL, name_expressions=("k",)).result(timeout=60).result.ok
    finally:
        pool.close()


def test_a_request_past_its_total_compile_time_gets_resource_limit_verdicts() -> None:
    pool = CompilePool(1, limits=CompileLimits(request_s=0.0))
    try:
        late = pool.submit(KERNEL, deadline=pool.deadline()).result(timeout=60)
        assert late.limited and RESOURCE_LIMIT in late.result.first_error()
        assert pool.submit(KERNEL).result(timeout=60).result.ok  # a limit's verdict is not cached
    finally:
        pool.close()


# --------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu
def test_on_a_gpu_steered_includes_bombs_and_deep_nesting_are_verdicts_and_the_worker_serves_on(
    secret: Path,
) -> None:
    from sandbox_fakes import kernel_file, vadd_request

    from sandbox.contract import Budget
    from sandbox.local import LocalExecutor

    vadd_path = Path(__file__).parent / "data" / "sandbox" / "vadd.cu"
    vadd = kernel_file(vadd_path, "vadd")
    steering = steered(STEERED_HEADERS[0], secret).removesuffix(KERNEL)
    bomb = BOMB[: BOMB.index("__device__")] + "__device__ int big[] = {A6};\n"
    deep = "__device__ int deep() { return " + "(" * 3000 + "1" + ")" * 3000 + "; }\n"
    candidates = (
        Candidate("steered", KernelSource(steering + vadd.source, "vadd")),
        Candidate("bomb", KernelSource(bomb + vadd.source, "vadd")),
        Candidate("deep", KernelSource(deep + vadd.source, "vadd")),
        Candidate("honest", vadd),
    )
    limits = CompileLimits(memory_bytes=2 << 30, cpu_s=20, wall_s=40)
    with LocalExecutor(compile_limits=limits) as ex:
        request = vadd_request(vadd, candidates, budget=Budget(timeout_s=60.0))
        result = ex.evaluate(request)
    got = {c.candidate_id: c for c in result.candidates}
    assert SECRET not in to_json(result)
    assert got["steered"].status == Status.COMPILE_ERROR
    assert got["bomb"].status == Status.COMPILE_ERROR and RESOURCE_LIMIT in got["bomb"].message
    assert got["deep"].status == Status.OK and got["honest"].status == Status.OK
