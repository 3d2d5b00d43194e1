"""The worker as an attacker meets it, on loopback: the real :class:`WorkerService` (and, where the
GPU is not the point, the real :class:`LocalExecutor` with the scripted GPU handler).

Absurd request fields are refused with 422 naming the field, before anything runs; a timeout is
finite and capped by the worker, so a hanging candidate is still killed; request ids are unique, so
many optimize/bench/suite runs in a row through one worker all work; half-sent requests cannot
starve an authenticated client; X-Forwarded-For is not trusted unless the operator says so.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sandbox_fakes import kernel_file, vadd_request
from test_remote import TOKEN, WatchedExecutor, auth, make_request, running_worker
from test_server_process import alive, children

from sandbox.contract import (
    Budget,
    Candidate,
    RequestError,
    RequestLimits,
    Status,
    to_dict,
    to_json,
    validate_request,
)
from sandbox.executor import ExecutorError, WorkerUnavailable
from sandbox.local import LocalExecutor
from sandbox.remote import RemoteExecutor
from sandbox.service import Limits
from server.cli.main import main

SCRIPTED = "sandbox_fakes:ScriptedHandler"
DATA = Path(__file__).parent / "data"


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set ``value`` at a dotted path of a request dict (``a.0.b``: key a, item 0, key b)."""

    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value

    return edit


ABSURD = [
    ("count -5", _set("verify_problems.0.args.0.count", -5), "verify_problems[0].args[0].count"),
    ("count 2^40", _set("bench_problem.args.1.count", 2**40), "bench_problem.args[1].count"),
    ("grid 2^31", _set("bench_problem.launch.grid", [2**31, 1, 1]), "bench_problem.launch.grid"),
    ("block 0,0,0", _set("verify_problems.0.launch.block", [0, 0, 0]), "verify_problems[0].launch.block"),
    ("block 2048", _set("bench_problem.launch.block", [64, 32, 1]), "bench_problem.launch.block"),
    ("smem -1", _set("bench_problem.launch.shared_bytes", -1), "bench_problem.launch.shared_bytes"),
    ("smem 228K", _set("bench_problem.launch.shared_bytes", 228 << 10), "bench_problem.launch.shared_bytes"),
    ("memory 0", _set("budget.gpu_memory_bytes", 0), "budget.gpu_memory_bytes"),
    ("10^12 samples", _set("budget.max_samples", 10**12), "budget.max_samples"),
    ("100000 seeds", _set("seeds", list(range(100_000))), "seeds"),
    ("negative seed", _set("seeds", [-1]), "seeds[0]"),
    ("7 MiB source", _set("candidates.0.kernel.source", "x" * (7 << 20)), "candidates[0].kernel.source"),
    ("dtype", _set("bench_problem.args.0.dtype", "no_such_type"), "bench_problem.args[0].dtype"),
    ("arch", _set("options.arch", "; rm -rf /"), "options.arch"),
    ("backend", _set("options.backend", "numba"), "options.backend"),
    ("timeout NaN", _set("budget.timeout_s", math.nan), "budget.timeout_s"),
    ("timeout 1e300", _set("budget.timeout_s", 1e300), "budget.timeout_s"),
    ("timeout inf", _set("budget.timeout_s", math.inf), "budget.timeout_s"),
    ("atol inf", _set("tolerance", {"atol": math.inf}), "tolerance.atol"),
    ("rtol -1", _set("tolerance", {"rtol": -1.0}), "tolerance.rtol"),
    ("precision", _set("allow_precision", ["fp4"]), "allow_precision[0]"),
    ("offset past the array", _set("bench_problem.args.2.offset", 1 << 40), "bench_problem.args[2].offset"),
    (
        "python in a compare region",
        _set(
            "bench_problem.args.2.compare",
            {"shape": [1 << 20], "index": ["i"], "where": "__import__('os').system('id')", "written": False},
        ),
        "bench_problem.args[2].compare.where",
    ),
    (
        "python in values()",
        _set("bench_problem.args.0.dist", {"kind": "values", "expr": "open('/etc/passwd')"}),
        "bench_problem.args[0].dist.expr",
    ),
    ("macro name", _set("bench_problem.defines", {"N=1 -I/": 3}), "bench_problem.defines"),
    (
        "65 candidates",
        _set("candidates", [to_dict(Candidate(f"c{i}", make_request("x").baseline)) for i in range(65)]),
        "candidates",
    ),
]


@pytest.mark.parametrize(("edit", "field"), [a[1:] for a in ABSURD], ids=[a[0] for a in ABSURD])
def test_each_absurd_field_is_refused_with_422_naming_it(
    edit: Callable[[dict[str, Any]], None], field: str
) -> None:
    data = to_dict(make_request("absurd"))
    edit(data)
    fake = WatchedExecutor()
    with running_worker(fake, limits=Limits(max_body_bytes=16 << 20)) as (url, _):
        response = httpx.post(f"{url}/evaluate", content=json.dumps(data), headers=auth(), timeout=30)
    assert response.status_code == 422, response.text
    body = response.json()  # out of bounds: "field" set; not the contract's type: cattrs's "@ $.path"
    assert body.get("field", field) == field and field in body["error"], body
    assert fake.evaluated == []


def test_deeply_nested_json_is_a_400_not_a_crash() -> None:
    fake = WatchedExecutor()
    with running_worker(fake) as (url, _):
        for body in (b"[" * 200_000 + b"]" * 200_000, b'{"id": ' + b"[" * 100_000):
            response = httpx.post(f"{url}/evaluate", content=body, headers=auth(), timeout=30)
            assert response.status_code == 400 and "not JSON" in response.json()["error"]
        assert httpx.get(f"{url}/health").status_code == 200
    assert fake.evaluated == []


def test_the_worker_limits_are_its_own_settings() -> None:
    request = make_request("big")
    validate_request(request)
    with pytest.raises(RequestError, match=r"^budget.timeout_s: 5.0 is not a finite number > 0 and <= 2$"):
        validate_request(request, RequestLimits(max_timeout_s=2))
    with pytest.raises(RequestError, match=r"^candidates: 3 candidates is outside 0..2$"):
        validate_request(request, RequestLimits(max_candidates=2))


@pytest.fixture
def scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalExecutor]:
    """The real local executor (NVRTC compile pool, spawned worker processes), scripted GPU."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with LocalExecutor(
        handler=SCRIPTED, sandbox=False, compile_workers=1, limits=RequestLimits(max_timeout_s=2.0)
    ) as executor:
        yield executor


@pytest.mark.slow
def test_a_hanging_candidate_is_killed_at_the_workers_maximum_timeout(scripted: LocalExecutor) -> None:
    vadd = kernel_file(DATA / "sandbox" / "vadd.cu", "vadd")
    limits = Limits(request=RequestLimits(max_timeout_s=2.0))
    with running_worker(scripted, limits=limits) as (url, _), RemoteExecutor(url, TOKEN) as remote:
        for timeout in (math.nan, 1e300):
            with pytest.raises(ExecutorError, match=r"422: budget.timeout_s: .* is not a finite number"):
                remote.evaluate(
                    vadd_request(vadd, (Candidate("hang", vadd),), budget=Budget(timeout_s=timeout))
                )
        started = time.monotonic()
        result = remote.evaluate(vadd_request(vadd, (Candidate("hang", vadd),), budget=Budget(timeout_s=2.0)))
    assert result.candidates[0].status is Status.TIMEOUT
    assert time.monotonic() - started < 20
    with pytest.raises(
        ExecutorError, match=r"refused: budget.timeout_s: inf"
    ):  # the local executor checks too
        scripted.evaluate(vadd_request(vadd, (), budget=Budget(timeout_s=math.inf)))


# --------------------------------------------------------------------------- request ids


@pytest.fixture
def remote_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A worker on loopback over the scripted local executor, and the CLI pointed at it; yields
    the ids of the requests the worker saw."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("CUDA_AGENT_TEST_EXECUTOR", raising=False)
    seen: list[str] = []
    scripted = LocalExecutor(handler=SCRIPTED, sandbox=False, compile_workers=2)
    evaluate = scripted.evaluate

    def watched(request: Any, **kw: Any) -> Any:
        seen.append(request.id)
        return evaluate(request, **kw)

    monkeypatch.setattr(scripted, "evaluate", watched)
    with scripted, running_worker(scripted) as (url, _):
        monkeypatch.setenv("CUDA_AGENT_WORKER_URL", url)
        monkeypatch.setenv("CUDA_AGENT_TOKEN", TOKEN)
        yield seen


@pytest.mark.slow
def test_five_optimize_and_bench_runs_in_a_row_through_one_worker(
    remote_env: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cu = Path(shutil.copy(DATA / "optimize" / "saxpy_poor_block.cu", tmp_path / "saxpy.cu"))
    for seed in range(5):
        assert main(["bench", str(cu), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["result"]["status"] == "ok"
        rc = main(
            ["optimize", str(cu), "--json", "--seed", str(seed % 2), "--budget", "2c", "--trajectory", "off"]
        )
        out = capsys.readouterr()
        assert "HTTP 409" not in out.err and rc in (0, 1), out.err
        assert json.loads(out.out)["baseline"]["status"] == "ok"
    assert len(remote_env) == len(set(remote_env)) >= 15  # every request its own id: 5 bench, 5 baselines...


@pytest.mark.slow
def test_a_suite_through_a_worker_runs_every_kernel(
    remote_env: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a", "b", "c"):
        shutil.copy(DATA / "optimize" / "saxpy_poor_block.cu", tmp_path / f"{name}.cu")
    rc = main(["suite", str(tmp_path), "--budget", "2c", "--json"])
    out = capsys.readouterr()
    assert "HTTP 409" not in out.err and rc in (0, 1), out.err
    entries = json.loads(out.out)["kernels"]
    assert len(entries) == 3 and all(e["status"] != "error" for e in entries), entries
    assert len(remote_env) == len(set(remote_env)) >= 6


# --------------------------------------------------------------------------- connections


def half_requests(url: str, n: int) -> list[socket.socket]:
    """``n`` connections that send half a request head and then nothing."""
    host, port = url.removeprefix("http://").split(":")
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)))
        s.sendall(b"POST /evaluate HTTP/1.1\r\nHost: x\r\nContent-Le")
        socks.append(s)
    return socks


def closed_by_peer(s: socket.socket, wait_s: float) -> bool:
    s.settimeout(wait_s)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:  # closed with our half request unread: a reset
        return True
    except TimeoutError:
        return False


def test_half_sent_requests_do_not_starve_an_authenticated_client() -> None:
    limits = Limits(max_waiting_connections=16, header_timeout_s=60)
    fake = WatchedExecutor()
    with running_worker(fake, limits=limits) as (url, _), RemoteExecutor(url, TOKEN) as remote:
        socks = half_requests(url, 200)
        try:
            started = time.monotonic()
            result = remote.evaluate(make_request("heard"))
            assert len(result.candidates) == 3 and time.monotonic() - started < 5
            assert closed_by_peer(socks[0], 5)  # the oldest waiting ones were dropped
            assert not closed_by_peer(socks[-1], 0.2)
        finally:
            for s in socks:
                s.close()


def test_a_connection_that_never_finishes_its_head_is_closed_at_the_deadline() -> None:
    with running_worker(WatchedExecutor(), limits=Limits(header_timeout_s=0.5)) as (url, _):
        (sock,) = half_requests(url, 1)
        with sock:
            started = time.monotonic()
            assert closed_by_peer(sock, 5)
            assert 0.3 < time.monotonic() - started < 3


def test_a_refused_token_closes_the_connection() -> None:
    with running_worker(WatchedExecutor()) as (url, _), httpx.Client() as client:
        response = client.post(f"{url}/evaluate", content=b"{}", headers=auth("wrong"))
    assert response.status_code == 401 and response.headers["connection"] == "close"


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [False, True])
def test_x_forwarded_for_is_trusted_only_from_a_configured_proxy(trusted: bool) -> None:
    limits = Limits(max_per_client=1, trusted_proxies=("127.0.0.1",) if trusted else ())
    fake = WatchedExecutor(delay_s=1.0)
    with running_worker(fake, limits=limits) as (url, _), httpx.Client(timeout=30) as client:
        body = [json.dumps(to_dict(make_request(f"xff-{i}"))) for i in range(2)]
        with client.stream(
            "POST", f"{url}/evaluate", content=body[0], headers={**auth(), "X-Forwarded-For": "10.0.0.1"}
        ) as first:
            assert first.status_code == 200
            second = client.post(
                f"{url}/evaluate", content=body[1], headers={**auth(), "X-Forwarded-For": "10.0.0.2"}
            )
            # caps are per token (issue 37): another forwarded address, trusted or not, is the same client
            assert second.status_code == 429


# --------------------------------------------------------------------------- a client that meets a non-worker


class _Impostor(BaseHTTPRequestHandler):
    """Answers every request with ``answer`` (content type, body) of its server."""

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._answer()

    def _answer(self) -> None:
        kind, body = self.server.answer  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _result_line(request_id: str, candidates: tuple[str, ...]) -> bytes:
    fake = make_request(request_id, candidates=len(candidates))
    result = WatchedExecutor().evaluate(fake)
    data = to_dict(result)
    for entry, cid in zip(data["candidates"], candidates, strict=True):
        entry["candidate_id"] = cid
    return json.dumps({"event": "result", "result": data}).encode() + b"\n"


NDJSON_TYPE = "application/x-ndjson"
IMPOSTORS = [
    ("html page", ("text/html", b"<html><body>Sign in</body></html>"), "a text/html page"),
    ("html as ndjson", (NDJSON_TYPE, b"<html><body>Sign in</body></html>\n"), "not JSON (JSONDecodeError"),
    ("no event", (NDJSON_TYPE, b'{"status": "ok"}\n'), 'a JSON dict without an "event" name'),
    ("not an object", (NDJSON_TYPE, b"[1, 2]\n"), 'a JSON list without an "event" name'),
    ("unknown event", (NDJSON_TYPE, b'{"event": "resolt"}\n'), "unknown event 'resolt'"),
    ("bad result", (NDJSON_TYPE, b'{"event": "result", "result": {"x": 1}}\n'), "malformed ResultEvent"),
    ("other request", (NDJSON_TYPE, _result_line("someone-else", ("c0", "c1", "c2"))), "someone-else"),
    ("other candidates", (NDJSON_TYPE, _result_line("mine", ("c0", "zz", "c2"))), "'zz'"),
]


@pytest.mark.parametrize(("answer", "needle"), [i[1:] for i in IMPOSTORS], ids=[i[0] for i in IMPOSTORS])
def test_a_non_worker_is_one_clear_error_never_a_wrong_answer(answer: tuple[str, bytes], needle: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Impostor)
    server.answer = answer  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with RemoteExecutor(url, TOKEN, reconnect_s=1) as remote:
            with pytest.raises(ExecutorError) as caught:
                remote.evaluate(make_request("mine"))
            assert str(caught.value).startswith(f"{url} does not answer like a cuda-agent worker")
            assert needle in str(caught.value) and "\n" not in str(caught.value)
            with pytest.raises(ExecutorError, match="does not answer like a cuda-agent worker"):
                remote.device_info()
    finally:
        server.shutdown()
        server.server_close()


def test_a_stream_that_always_ends_early_is_one_clear_error() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Impostor)
    server.answer = (NDJSON_TYPE, b'{"event": "queued", "gpu": 0, "ahead": 0}\n')  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with RemoteExecutor(url, TOKEN, reconnect_s=1) as remote, pytest.raises(WorkerUnavailable) as caught:
            remote.evaluate(make_request("mine"))
        assert "closed the stream before the result" in str(caught.value) and "\n" not in str(caught.value)
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- the worker command's processes


def test_the_worker_command_under_sigterm_stops_its_pools(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", "worker", "--port", "0", "--token-file", str(token)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "serving GPUs" in line, line
        url = re.search(r"https?://[\w.:]+", line).group(0)  # type: ignore[union-attr]
        # An evaluation starts the GPU worker process (without a GPU it then reports none).
        response = httpx.post(
            f"{url}/evaluate", content=to_json(make_request("w")), headers=auth(), timeout=60
        )
        assert response.status_code == 200
        kids = children(proc.pid)
        assert kids, "the worker started no process"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 128 + signal.SIGTERM  # its own exit, after closing the executors
        deadline = time.monotonic() + 5
        while any(alive(k) for k in kids):
            assert time.monotonic() < deadline, [k for k in kids if alive(k)]
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
