"""Issue 28's attacks on the worker's HTTP side, on loopback (the real service, a simulated GPU):
slow bodies, connection floods, refused tokens and abandoned uploads that would fill the log,
and JSON no field can take (lone surrogates, integers of thousands of digits): clear 408s, 503s
and 422s, never a 500 or a traceback, and legitimate clients served throughout."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from test_remote import TOKEN, WatchedExecutor, auth, make_request, running_worker

from sandbox.contract import to_dict
from sandbox.remote import RemoteExecutor
from sandbox.service import Limits


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)))


def slow_body(url: str) -> socket.socket:
    """A connection that sends an authenticated head and a few bytes of a 4 KiB body, then nothing."""
    s = connect(url)
    head = (
        f"POST /evaluate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 4096\r\n\r\n"
    )
    s.sendall(head.encode() + b'{"id": ')
    return s


def answer(s: socket.socket, wait_s: float) -> bytes:
    """What the server sends on ``s`` until it closes it (or ``wait_s`` passes)."""
    s.settimeout(wait_s)
    data = b""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture
def service_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    for name in ("sandbox.service", "base.http", "base.asgi"):  # the worker and its HTTP toolkit
        caplog.set_level(logging.INFO, logger=name)
    yield caplog


def test_300_slow_bodies_do_not_keep_legitimate_clients_out(service_log: pytest.LogCaptureFixture) -> None:
    limits = Limits(max_receiving_bodies=16, body_timeout_s=60)
    with running_worker(WatchedExecutor(), limits=limits) as (url, _), RemoteExecutor(url, TOKEN) as remote:
        remote.evaluate(make_request("warm-up"))  # the compile worker is started
        socks = []
        try:
            for i in range(300):
                socks.append(slow_body(url))
                if i % 100 == 99:  # a legitimate client, again and again while they pile up
                    started = time.monotonic()
                    result = remote.evaluate(make_request(f"legit-{i}"))
                    assert len(result.candidates) == 3 and time.monotonic() - started < 1.0
            assert answer(socks[0], 5) == b""  # the oldest slow bodies were closed
        finally:
            for s in socks:
                s.close()
    assert len(service_log.records) < 20 and not any(r.exc_info for r in service_log.records)


def test_a_body_that_does_not_arrive_in_time_is_a_408() -> None:
    with running_worker(WatchedExecutor(), limits=Limits(body_timeout_s=0.5)) as (url, _):
        with slow_body(url) as s:
            started = time.monotonic()
            reply = answer(s, 10)
        assert reply.startswith(b"HTTP/1.1 408") and b"not received within" in reply
        assert time.monotonic() - started < 5


def test_past_the_connection_cap_a_client_gets_503_with_retry_after() -> None:
    limits = Limits(max_connections_per_client=4, header_timeout_s=30)
    with running_worker(WatchedExecutor(), limits=limits) as (url, _):
        idle = [connect(url) for _ in range(4)]
        try:
            with connect(url) as fifth:
                reply = answer(fifth, 5)
            assert reply.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in reply and b"busy" in reply
        finally:
            for s in idle:
                s.close()
        deadline = time.monotonic() + 10  # once they are closed, clients are heard again
        while httpx.get(f"{url}/health", timeout=5).status_code != 200:
            assert time.monotonic() < deadline


def test_a_retry_after_503_is_retried_by_the_remote_executor() -> None:
    from sandbox.remote import _transient

    busy = httpx.Response(503, headers={"Retry-After": "1"}, json={"error": "the worker is busy"})
    no_gpu = httpx.Response(503, json={"error": "no usable GPU"})
    assert _transient(busy) and not _transient(no_gpu)


def test_refused_tokens_and_abandoned_uploads_are_logged_once_without_tracebacks(
    service_log: pytest.LogCaptureFixture,
) -> None:
    with running_worker(WatchedExecutor()) as (url, _), httpx.Client() as client:
        for _ in range(50):
            assert client.post(f"{url}/evaluate", content=b"{}", headers=auth("wrong")).status_code == 401
        for _ in range(20):
            slow_body(url).close()
        assert httpx.get(f"{url}/health", timeout=5).status_code == 200
        deadline = time.monotonic() + 10  # the worker notices the last upload's end
        while not any("left in the middle" in r.getMessage() for r in service_log.records):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    refusals = [r for r in service_log.records if "401" in r.getMessage()]
    gone = [r for r in service_log.records if "left in the middle" in r.getMessage()]
    assert len(refusals) == 1 and len(gone) == 1
    assert not any(r.exc_info for r in service_log.records)


def _with(path: str, value: str) -> str:
    """A valid request's JSON with the string at ``path`` replaced by raw JSON ``value``."""
    data = to_dict(make_request("odd"))
    node = data
    *parents, last = path.split(".")
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    node[int(last) if last.isdigit() else last] = "@@PLACEHOLDER@@"
    return json.dumps(data).replace('"@@PLACEHOLDER@@"', value)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("bench_problem.args.0.role", '"\\ud800"', "bench_problem.args[0].role"),
        ("bench_problem.args.0.dist", '{"kind": "\\ud800"}', "bench_problem.args[0].dist.kind"),
        ("options.backend", '"cu\\udfffpy"', "options.backend"),
        ("schema_version", '"\\ud800"', "schema_version"),
        ("bench_problem.args.0.count", "9" * 5000, "bench_problem.args[0].count"),
        ("seeds.0", "1" + "0" * 4400, "seeds[0]"),
    ],
)
def test_json_no_field_can_take_is_a_422_naming_the_field(path: str, value: str, field: str) -> None:
    with running_worker(WatchedExecutor()) as (url, _):
        response = httpx.post(f"{url}/evaluate", content=_with(path, value), headers=auth(), timeout=30)
        assert response.status_code == 422, response.text
        assert response.json()["field"] == field and field in response.json()["error"]
        assert httpx.get(f"{url}/health", timeout=5).status_code == 200
