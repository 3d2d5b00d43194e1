"""The remote worker on loopback: a real uvicorn server around a fake executor (no GPU needed).

Covers the token, malformed/oversized requests, the per-client limit, idempotent request ids,
cancellation (explicit and by disconnecting), a worker killed mid-run and coming back, TLS, the
`cuda-agent worker` command's refusals, and a load test of 200 concurrent evaluations.

Run as a script (``python tests/test_remote.py PORT TOKEN DELAY_S``) it is a fake worker process,
so tests can kill it with SIGKILL.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from simulated_worker import free_port, simulated_worker
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from base.asgi import make_server
from base.http import listen
from sandbox.compile_pool import compile_isolation
from sandbox.contract import (
    ArgSpec,
    Budget,
    Candidate,
    DeviceInfo,
    EvalRequest,
    EvalResult,
    KernelSource,
    Launch,
    Problem,
    Progress,
    Status,
    to_json,
)
from sandbox.executor import AuthError, Executor, ExecutorError, NoGpuError, ProgressFn, WorkerUnavailable
from sandbox.programs import ProgramHost
from sandbox.remote import CONNECT_TIMEOUT_S, RemoteExecutor
from sandbox.service import Limits, WorkerService
from sandbox.testing import FakeExecutor

TOKEN = "test-token-3f9a"
VADD = (Path(__file__).parent / "data" / "remote_vadd.cu").read_text()


def make_request(request_id: str, candidates: int = 3, source: str = VADD) -> EvalRequest:
    n = 1 << 20
    args = (
        ArgSpec("a", "in", "float32", n),
        ArgSpec("b", "in", "float32", n),
        ArgSpec("c", "out", "float32", n),
        ArgSpec("n", "scalar", "int32", value=n),
    )
    problem = Problem(f"n={n}", {"n": n}, args, Launch((n // 256, 1, 1), (256, 1, 1)), bytes_moved=12 * n)
    return EvalRequest(
        id=request_id,
        baseline=KernelSource(source, "vadd"),
        candidates=tuple(
            Candidate(f"c{i}", KernelSource(source.replace("256", str(128 << i)), "vadd"))
            for i in range(candidates)
        ),
        verify_problems=(problem,),
        bench_problem=problem,
        budget=Budget(timeout_s=5.0),
    )


class WatchedExecutor(FakeExecutor):
    """The sandbox's fake executor (candidates identical to the baseline run at 1x, others at 2x),
    noting when an evaluation is under way and when a cancel reached it."""

    def __init__(self, delay_s: float = 0.0) -> None:
        super().__init__(delay_s=delay_s)
        self.running = threading.Event()
        self.saw_cancel = threading.Event()

    @property
    def evaluated(self) -> list[str]:
        """The callers' ids (a RemoteExecutor adds its unguessable suffix on the wire)."""
        return [r.id.split("~")[0] for r in self.requests]

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        self.running.set()
        result = super().evaluate(request, progress=progress, cancel=cancel)
        if any(c.status is Status.CANCELLED for c in result.candidates):
            self.saw_cancel.set()
        return result


@contextlib.contextmanager
def running_worker(
    *executors: Executor,
    token: str | None = TOKEN,
    limits: Limits | None = None,
    tls: tuple[str, str] | None = None,
    front: Callable[[ASGIApp], ASGIApp] = lambda app: app,
    programs: ProgramHost | None = None,
) -> Iterator[tuple[str, WorkerService]]:
    """A real uvicorn server on a free loopback port, in a thread; ``front`` wraps the service's
    application (to put a misbehaving gateway in front of it); ``programs``: ``POST /program``'s host."""
    service = WorkerService(executors, token=token, limits=limits or Limits(), programs=programs)
    server = make_server(
        front(service.app),
        tls_cert=tls[0] if tls else None,
        tls_key=tls[1] if tls else None,
        log_level="warning",
        limits=service.limits,
    )
    sock = listen("127.0.0.1", 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "worker did not start"
        time.sleep(0.01)
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{sock.getsockname()[1]}", service
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


def ids(jobs: dict[tuple[str, str], Any]) -> set[str]:
    """The callers' ids of a worker's jobs (keyed by requester and wire id)."""
    return {wire.split("~")[0] for _, wire in jobs}


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --------------------------------------------------------------------------- token


def test_health_is_open_and_everything_else_needs_the_token() -> None:
    with running_worker(WatchedExecutor()) as (url, _):
        health = httpx.get(f"{url}/health").json()
        assert health == {"status": "ok", "gpus": 1, "simulated": False, "isolation": "none"}
        missing = httpx.get(f"{url}/device")
        assert missing.status_code == 401 and missing.json()["error"] == "missing bearer token"
        wrong = httpx.get(f"{url}/device", headers=auth("nope"))
        assert wrong.status_code == 401 and wrong.json()["error"] == "wrong bearer token"
        assert httpx.post(f"{url}/evaluate", content=to_json(make_request("r"))).status_code == 401
        assert httpx.post(f"{url}/cancel", json={"id": "r"}).status_code == 401
        ok = httpx.get(f"{url}/device", headers=auth())
        assert ok.json()["devices"][0]["name"] == "simulated GPU"


def test_an_unreadable_certificate_to_trust_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ExecutorError, match=f"cannot load the certificate to trust .*{tmp_path}/none.pem"):
        RemoteExecutor("https://gpu-box:8765", TOKEN, verify=str(tmp_path / "none.pem"))


def test_wrong_token_is_one_auth_error_and_runs_nothing() -> None:
    fake = WatchedExecutor()
    with running_worker(fake) as (url, _), RemoteExecutor(url, "wrong-token") as remote:
        with pytest.raises(AuthError, match=rf"worker at {url} refused the token .*wrong bearer token"):
            remote.evaluate(make_request("r1"))
        with pytest.raises(AuthError):
            remote.device_info()
    assert fake.evaluated == []


# --------------------------------------------------------------------------- evaluation


def test_evaluation_streams_progress_then_the_result() -> None:
    fake = WatchedExecutor(delay_s=0.01)
    request = make_request("stream-1", candidates=4)
    seen: list[Progress] = []
    with running_worker(fake) as (url, _), RemoteExecutor(url, TOKEN) as remote:
        result = remote.evaluate(request, progress=seen.append)
        assert remote.device_info().name == "simulated GPU"
    assert [p.done for p in seen] == [1, 2, 3, 4] and all(p.total == 4 for p in seen)
    assert result.request_id == "stream-1"
    assert [c.candidate_id for c in result.candidates] == ["c0", "c1", "c2", "c3"]
    assert [round(c.speedup, 6) for c in result.candidates] == [2.0, 1.0, 2.0, 2.0]
    assert result.device is not None and result.device.name == "simulated GPU"


def test_a_replay_is_answered_from_the_cache_and_a_finished_id_with_a_new_body_runs() -> None:
    fake = WatchedExecutor()
    with running_worker(fake) as (url, _), RemoteExecutor(url, TOKEN) as remote:
        first = remote.evaluate(make_request("same-id"))
        again = remote.evaluate(make_request("same-id"))
        other = remote.evaluate(make_request("same-id", candidates=1))
    assert first == again and len(other.candidates) == 1
    assert fake.evaluated == ["same-id", "same-id"]  # the replay ran nothing, the new body ran


def test_a_running_id_posted_with_another_body_is_refused() -> None:
    fake = WatchedExecutor(delay_s=0.5)
    with (
        running_worker(fake) as (url, _),
        RemoteExecutor(url, TOKEN) as remote,
        ThreadPoolExecutor(1) as pool,
    ):
        running = pool.submit(remote.evaluate, make_request("busy-id"))
        assert fake.running.wait(5)
        with pytest.raises(ExecutorError, match=r"409.*in use by a different running request"):
            remote.evaluate(make_request("busy-id", candidates=1))
        assert len(running.result(10).candidates) == 3


def test_requests_spread_over_the_gpu_lanes() -> None:
    lanes = [WatchedExecutor(delay_s=0.05), WatchedExecutor(delay_s=0.05)]
    with (
        running_worker(*lanes) as (url, _),
        RemoteExecutor(url, TOKEN) as remote,
        ThreadPoolExecutor(4) as pool,
    ):
        list(pool.map(remote.evaluate, [make_request(f"lane-{i}", 2) for i in range(4)]))
    assert len(lanes[0].evaluated) == len(lanes[1].evaluated) == 2


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "body, status, needle",
    [
        (b"{not json", 400, "body is not JSON"),
        (b'{"id": "x"}', 422, "malformed EvalRequest"),
        (
            to_json(make_request("v")).replace('"schema_version":1', '"schema_version":99').encode(),
            422,
            "schema version 99",
        ),
        (to_json(make_request("")).encode(), 422, "id: must be 1-200 printable"),
        (
            to_json(make_request("inc")).replace('"options":[]', '"options":["-I/etc"]', 1).encode(),
            422,
            "not allowed in a request",
        ),
        (
            to_json(make_request("s")).replace('"seeds":[1,2,3]', '"seeds":[]', 1).encode(),
            422,
            "at least one seed",
        ),
        (b"x" * 70_000, 413, "larger than 65536 bytes"),
    ],
    ids=["not-json", "wrong-shape", "schema-version", "empty-id", "include-path", "no-seeds", "oversized"],
)
def test_malformed_and_oversized_requests_are_refused(body: bytes, status: int, needle: str) -> None:
    fake = WatchedExecutor()
    with running_worker(fake, limits=Limits(max_body_bytes=65536)) as (url, _):
        response = httpx.post(f"{url}/evaluate", content=body, headers=auth())
    assert response.status_code == status
    assert needle in response.json()["error"]
    assert fake.evaluated == []


def test_oversized_stream_without_content_length_is_refused() -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(100):
            yield b" " * 4096

    with running_worker(WatchedExecutor(), limits=Limits(max_body_bytes=65536)) as (url, _):
        response = httpx.post(f"{url}/evaluate", content=chunks(), headers=auth())
    assert response.status_code == 413


def test_remote_executor_reports_a_refused_request_clearly() -> None:
    big = make_request("big", source=VADD + "// padding\n" * 10_000)
    with (
        running_worker(WatchedExecutor(), limits=Limits(max_body_bytes=65536)) as (url, _),
        RemoteExecutor(url, TOKEN) as remote,
        pytest.raises(ExecutorError, match="refused the request: HTTP 413"),
    ):
        remote.evaluate(big)


def test_per_client_concurrency_limit_answers_429() -> None:
    fake = WatchedExecutor(delay_s=5.0)
    with (
        running_worker(fake, limits=Limits(max_per_client=1)) as (url, _),
        httpx.Client(headers=auth()) as client,
        client.stream("POST", f"{url}/evaluate", content=to_json(make_request("busy"))) as first,
    ):
        assert first.status_code == 200
        second = client.post(f"{url}/evaluate", content=to_json(make_request("next")))
        assert second.status_code == 429
        assert second.headers["Retry-After"] == "1"
        assert "already in flight" in second.json()["error"]
        assert client.post(f"{url}/cancel", json={"id": "busy"}).json() == {
            "id": "busy",
            "cancelled": True,
            "finished": False,
        }
        assert client.post(f"{url}/cancel", json={"id": "nope"}).status_code == 404
        assert client.post(f"{url}/cancel", content=b"busy").status_code == 400
    assert fake.evaluated == ["busy"]


# --------------------------------------------------------------------------- cancellation


def test_cancel_reaches_the_worker_and_returns_cancelled_candidates() -> None:
    fake = WatchedExecutor(delay_s=10.0)
    cancel = threading.Event()
    with (
        running_worker(fake) as (url, _),
        RemoteExecutor(url, TOKEN) as remote,
        ThreadPoolExecutor(1) as pool,
    ):
        future = pool.submit(remote.evaluate, make_request("optimize/run 1"), cancel=cancel)
        assert fake.running.wait(5)
        started = time.monotonic()
        cancel.set()
        assert fake.saw_cancel.wait(5), "the cancel never reached the executor on the worker"
        result = future.result(timeout=10)
    assert time.monotonic() - started < 5
    assert [c.status for c in result.candidates] == [Status.CANCELLED] * 3


def test_a_client_that_disconnects_for_good_cancels_its_job() -> None:
    fake = WatchedExecutor(delay_s=10.0)
    with running_worker(fake, limits=Limits(disconnect_grace_s=0.2)) as (url, service):
        with httpx.stream(
            "POST", f"{url}/evaluate", content=to_json(make_request("gone")), headers=auth()
        ) as r:
            assert next(r.iter_lines()).startswith('{"event":"queued"')
            assert fake.running.wait(5)
        assert fake.saw_cancel.wait(5)
        deadline = time.monotonic() + 5
        while ids(service.running):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert "gone" not in ids(service.done)  # an abandoned job's result is not served to a later retry


def test_a_client_that_reconnects_in_time_gets_the_same_job() -> None:
    fake = WatchedExecutor(delay_s=0.3)
    request = make_request("blip", candidates=2)
    with (
        running_worker(fake, limits=Limits(disconnect_grace_s=5.0)) as (url, _),
        RemoteExecutor(url, TOKEN) as remote,
    ):
        wire = replace(request, id=f"blip~{remote._id_suffix}")  # as this client sends it
        with httpx.stream("POST", f"{url}/evaluate", content=to_json(wire), headers=auth()) as r:
            next(r.iter_lines())
            assert fake.running.wait(5)
        result = remote.evaluate(request)
    assert not fake.saw_cancel.is_set()
    assert fake.evaluated == ["blip"]
    assert [c.status for c in result.candidates] == [Status.OK, Status.OK]


class FlakyGateway:
    """A gateway in front of the worker that answers its first ``failures`` requests with a bare 502,
    as a proxy or tunnel does while the worker behind it restarts."""

    def __init__(self, app: ASGIApp, failures: int) -> None:
        self.app = app
        self.failures = failures

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.failures > 0:
            self.failures -= 1
            await PlainTextResponse("Bad Gateway", status_code=502)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def test_a_gateway_error_is_retried_until_the_worker_answers() -> None:
    fake = WatchedExecutor()
    with (
        running_worker(fake, front=lambda app: FlakyGateway(app, failures=3)) as (url, _),
        RemoteExecutor(url, TOKEN, reconnect_s=10) as remote,
    ):
        result = remote.evaluate(make_request("through-gateway", 2))
    assert [c.status for c in result.candidates] == [Status.OK, Status.OK]
    assert fake.evaluated == ["through-gateway"]


class GpulessExecutor(FakeExecutor):
    def device_info(self) -> DeviceInfo:
        raise NoGpuError("no GPU: CUDA reports 0 devices")

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        raise NoGpuError("no GPU: CUDA reports 0 devices")


def test_a_worker_without_a_gpu_is_one_clear_error_at_once() -> None:
    with (
        running_worker(GpulessExecutor()) as (url, service),
        RemoteExecutor(url, TOKEN, reconnect_s=30) as remote,
    ):
        health = httpx.get(f"{url}/health")  # open, and honest: no GPU
        assert health.status_code == 503 and health.json()["status"] == "no_gpu"
        assert "CUDA reports 0 devices" in health.json()["error"]
        started = time.monotonic()
        with pytest.raises(WorkerUnavailable, match=f"worker at {url} cannot evaluate: HTTP 503: no GPU"):
            remote.device_info()
        with pytest.raises(
            WorkerUnavailable, match=f"worker at {url} failed: no GPU: CUDA reports 0 devices"
        ):
            remote.evaluate(make_request("no-gpu"))
        assert time.monotonic() - started < 5  # not retried as if the worker were unreachable
        assert "no-gpu" not in ids(service.done)  # a failure is not cached: a retry runs again


# --------------------------------------------------------------------------- a worker that dies


@contextlib.contextmanager
def worker_process(port: int, delay_s: float) -> Iterator[subprocess.Popen[bytes]]:
    """This file run as a fake worker process on ``port``; killed (SIGKILL) on exit."""
    proc = subprocess.Popen([sys.executable, __file__, str(port), TOKEN, str(delay_s)])
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "fake worker exited"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, "fake worker did not come up"
            time.sleep(0.05)
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_a_killed_worker_is_a_clear_error_and_the_client_recovers_when_it_returns() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    progress = threading.Event()
    with RemoteExecutor(url, TOKEN, reconnect_s=1.0) as remote:
        with worker_process(port, delay_s=1.0) as proc, ThreadPoolExecutor(1) as pool:
            future = pool.submit(
                remote.evaluate, make_request("doomed", 5), progress=lambda p: progress.set()
            )
            assert progress.wait(10)
            proc.kill()
            with pytest.raises(WorkerUnavailable, match=rf"cannot reach the worker at {url} for 1 s"):
                future.result(timeout=15)
        with worker_process(port, delay_s=0.0):
            result = remote.evaluate(make_request("after", 2))
    assert [c.status for c in result.candidates] == [Status.OK, Status.OK]


@pytest.mark.slow
def test_a_worker_restarted_within_the_reconnect_window_finishes_the_same_call() -> None:
    port = free_port()
    progress = threading.Event()
    with (
        RemoteExecutor(f"http://127.0.0.1:{port}", TOKEN, reconnect_s=30.0) as remote,
        ThreadPoolExecutor(1) as pool,
    ):
        with worker_process(port, delay_s=0.5) as proc:
            future = pool.submit(
                remote.evaluate, make_request("survivor", 4), progress=lambda p: progress.set()
            )
            assert progress.wait(10)
            proc.kill()
        with worker_process(port, delay_s=0.0):
            result = future.result(timeout=30)
    assert result.request_id == "survivor"
    assert [c.status for c in result.candidates] == [Status.OK] * 4


def test_an_unreachable_worker_is_one_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with RemoteExecutor(url, TOKEN, reconnect_s=0.5) as remote, pytest.raises(WorkerUnavailable) as info:
        remote.evaluate(make_request("nobody-home"))
    assert time.monotonic() - started < 5
    assert str(info.value).startswith(f"cannot reach the worker at {url} for 0 s (ConnectError")
    assert "is `cuda-agent worker` running there" in str(info.value)


def test_an_unreachable_worker_is_reported_at_once_and_at_each_retry() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    heard: list[tuple[float, Progress]] = []
    started = time.monotonic()
    with RemoteExecutor(url, TOKEN, reconnect_s=1.5) as remote, pytest.raises(WorkerUnavailable):
        assert remote._client.timeout.connect == CONNECT_TIMEOUT_S == 2.0
        remote.evaluate(
            make_request("retried", 2), progress=lambda p: heard.append((time.monotonic() - started, p))
        )
    assert len(heard) >= 2 and heard[0][0] < CONNECT_TIMEOUT_S  # the first failed attempt, at once
    assert all(p.message.startswith(f"cannot reach the worker at {url} (ConnectError") for _, p in heard)
    assert "retrying for up to" in heard[0][1].message and heard[0][1].request_id == "retried"


# --------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = str(d / "cert.pem"), str(d / "key.pem")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            key,
            "-out",
            cert,
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_worker_is_reachable_with_its_certificate_and_refused_without(
    self_signed: tuple[str, str],
) -> None:
    cert, _ = self_signed
    with running_worker(WatchedExecutor(), tls=self_signed) as (url, _):
        with RemoteExecutor(url, TOKEN, verify=cert) as remote:
            assert remote.evaluate(make_request("tls", 1)).candidates[0].status is Status.OK
        with (
            RemoteExecutor(url, TOKEN) as remote,
            pytest.raises(WorkerUnavailable, match=f"TLS check of {url} failed"),
        ):
            remote.device_info()


# --------------------------------------------------------------------------- `cuda-agent worker`


def run_worker_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server", "worker", *args], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.mark.slow
def test_the_remote_flow_on_loopback_with_a_simulated_worker(tmp_path: Path) -> None:
    """`cuda-agent worker --simulate`, then the CLI against it several times in a row; the worker
    says it is simulated, logs each request's outcome (refusals too) and never the token."""
    token = "s3cret-loopback-token"
    kernel = tmp_path / "saxpy.cu"
    kernel.write_text((Path(__file__).parent.parent / "bench" / "kernels" / "saxpy.cu").read_text())
    with simulated_worker(tmp_path, token) as worker:
        url = worker.url
        health = httpx.get(f"{url}/health", timeout=5)
        assert health.json() == {
            "status": "ok",
            "gpus": 1,
            "simulated": True,
            "isolation": compile_isolation(),  # what this host allows (the test passes --unsafe-no-isolation)
        }
        device = httpx.get(f"{url}/device", headers=auth(token)).json()
        assert device["simulated"] is True and device["devices"][0]["name"] == "simulated GPU"
        assert httpx.get(f"{url}/device", headers=auth("wrong")).status_code == 401

        client_env = worker.client_env()
        cli = [sys.executable, "-m", "server"]
        for _ in range(3):
            run = subprocess.run(
                [*cli, "optimize", str(kernel)], capture_output=True, text=True, env=client_env, timeout=120
            )
            assert run.returncode == 0, run.stderr
            assert "on the simulated GPU, not measured" in run.stdout and "2.00x" in run.stdout
        bench = subprocess.run(
            [*cli, "bench", str(kernel)], capture_output=True, text=True, env=client_env, timeout=60
        )
        assert bench.returncode == 0 and "simulated GPU" in bench.stdout, bench.stderr
        # simulating locally and a worker URL: the worker gets the work, and a line says so
        both = subprocess.run(
            [*cli, "bench", str(kernel)],
            capture_output=True,
            text=True,
            env={**client_env, "CUDA_AGENT_TEST_EXECUTOR": "1"},
            timeout=60,
        )
        assert both.returncode == 0 and f"so is the remote worker {url}: evaluating there" in both.stderr
        before = worker.log.read_text().count(": done")
        assert before >= 5  # every request of the three runs and the two benchmarks
    log = worker.log.read_text()
    assert "serving 1 simulated GPU on http://127.0.0.1" in log and "(no GPU is used)" in log
    assert "refused GET /device from 127.0.0.1: 401 wrong bearer token" in log
    assert token not in log


def test_worker_command_refuses_unsafe_or_impossible_setups(tmp_path: Path, busy_port: int) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o600)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    cases = [
        (("--host", "0.0.0.0"), "refusing to listen on 0.0.0.0 without --token-file"),
        (("--token-file", "/no/such/token"), "/no/such/token: cannot read the token"),
        (("--token-file", str(empty)), "the token file is empty"),
        (("--tls-key", str(token)), "--tls-key needs --tls-cert"),
        (("--tls-cert", str(token)), f"cannot use TLS certificate {token}"),
        (("--gpus", "zero"), "expected comma-separated GPU indices"),
        (("--token-file", str(token), "--port", str(busy_port)), f"cannot listen on 127.0.0.1:{busy_port}"),
    ]
    with ThreadPoolExecutor(len(cases)) as pool:  # independent processes: both cores at once
        outs = list(pool.map(lambda case: run_worker_cli(*case[0]), cases))
    for (args, needle), out in zip(cases, outs, strict=True):
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2, (args, out.stderr)
        assert len(lines) == 1 and lines[0].startswith("cuda-agent: error:"), (args, out.stderr)
        assert needle in lines[0], (args, lines[0])


# --------------------------------------------------------------------------- load


@pytest.mark.slow
def test_load_200_concurrent_evaluations_all_answered_nothing_lost() -> None:
    """200 evaluations at once from one client whose limit is 32: the rest are refused with 429
    and retried, two GPU lanes share the work, and every request gets its own result exactly once."""
    lanes = [WatchedExecutor(delay_s=0.002), WatchedExecutor(delay_s=0.002)]
    requests = [make_request(f"load-{i:03d}", candidates=2) for i in range(200)]
    started = time.monotonic()
    with running_worker(*lanes, limits=Limits(max_per_client=32)) as (url, service):
        with RemoteExecutor(url, TOKEN, queue_timeout_s=60) as remote, ThreadPoolExecutor(200) as pool:
            results = list(pool.map(remote.evaluate, requests, timeout=90))
        assert not service.running and not service.clients
    elapsed = time.monotonic() - started
    assert [r.request_id for r in results] == [r.id for r in requests]
    assert all(c.status is Status.OK for r in results for c in r.candidates)
    ran = lanes[0].evaluated + lanes[1].evaluated
    assert sorted(ran) == sorted(r.id for r in requests)  # each ran exactly once
    assert min(len(lane.evaluated) for lane in lanes) > 50  # both lanes worked
    assert elapsed < 60


def serve_fake_worker(port: int, token: str, delay_s: float) -> None:
    service = WorkerService([FakeExecutor(delay_s=delay_s)], token=token)
    make_server(service.app, log_level="warning").run(sockets=[listen("127.0.0.1", port)])


if __name__ == "__main__":
    serve_fake_worker(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
