"""The ASGI toolkit the worker service and the reward service share: the server, auth, request bodies.

- :func:`make_server`: a uvicorn server whose connections are bounded by
  :class:`~base.http.ConnectionLimits` (request-head deadline, waiting and body-sending connections
  capped, open connections capped in all and per client address);
- :class:`BearerAuth`: ASGI middleware, ``Authorization: Bearer <token>`` on every path but
  :data:`~base.http.HEALTH_PATH`, compared in constant time;
- :func:`read_body`: a request's body within a size limit and a deadline;
- :func:`error_response`: ``{"error": message}`` with every non-ASCII character escaped.

Needs the ``worker`` extra (Starlette, uvicorn); imports no other package of this project but
:mod:`base.http`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import resource
import socket
from collections import OrderedDict
from dataclasses import replace
from typing import Any, ClassVar

import h11
import uvicorn
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from base.http import BODY_TIMEOUT_S, HEALTH_PATH, MIN_BODY_RATE, ConnectionLimits, QuietLog


def make_server(
    app: ASGIApp,
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    log_level: str = "info",
    limits: ConnectionLimits | None = None,
) -> QuietServer:
    """A uvicorn server for ``app``; run it with ``server.run(sockets=[listen(host, port)])``.

    No overall connection cap (uvicorn's ``limit_concurrency`` answers every request 503 while idle
    connections fill it): connections that have not sent a request head, unauthenticated by
    definition, are bounded by :class:`_GuardedH11` instead; X-Forwarded-For is read only from
    ``limits.trusted_proxies``."""
    limits = limits or ConnectionLimits()
    soft_files, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft_files != resource.RLIM_INFINITY:  # never run out of file descriptors
        limits = replace(limits, max_connections=max(1, min(limits.max_connections, soft_files // 2)))
    quiet = QuietLog(limits.log_interval_s)
    state = {
        "waiting": OrderedDict(),
        "receiving": OrderedDict(),
        "open_by_client": {},
        "limits": limits,
        "quiet": quiet,
    }
    guard = type("GuardedH11", (_GuardedH11,), state)
    config = uvicorn.Config(
        app,
        http=guard,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        timeout_keep_alive=max(1, round(limits.keep_alive_s)),
        proxy_headers=bool(limits.trusted_proxies),
        forwarded_allow_ips=list(limits.trusted_proxies),
    )
    return QuietServer(config, quiet)


class QuietServer(uvicorn.Server):
    """uvicorn's server whose event loop reports a failing ``accept()`` once per condition per
    interval: asyncio logs a traceback for each of the listen backlog's slots (2,048) every
    second while the open-file limit is reached, which once filled the log at ~1,900 lines a
    second; any other loop error goes to asyncio's default handler."""

    def __init__(self, config: uvicorn.Config, quiet: QuietLog) -> None:
        super().__init__(config)
        self.quiet = quiet

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(self._loop_error)
        await super().startup(sockets)

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and context.get("message", "").startswith("socket.accept()"):
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            self.quiet.log(
                logging.ERROR,
                f"accept:{exc.errno}",
                "cannot accept connections: %s (open-file limit %s); new connections wait",
                exc.strerror or exc,
                soft,
            )
            return
        loop.default_exception_handler(context)


class _GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline, a cap on connections waiting for one,
    a cap on connections sending a body, and caps on open connections.  Past
    ``max_waiting_connections`` (``max_receiving_bodies``) the oldest connection waiting for a
    head (sending a body) is closed, so a flood of half-sent requests or slow bodies cannot keep
    an authenticated client from being heard (it sends its request at once).  Past
    ``max_connections`` in all or ``max_connections_per_client`` from one address, a new
    connection is answered 503 with ``Retry-After`` and closed.  The class attributes are set per
    server by :func:`make_server`."""

    waiting: ClassVar[OrderedDict[_GuardedH11, asyncio.TimerHandle]]
    receiving: ClassVar[OrderedDict[_GuardedH11, None]]
    open_by_client: ClassVar[dict[str, int]]  # open connections by client address
    limits: ClassVar[ConnectionLimits]
    quiet: ClassVar[QuietLog]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if peer else "unknown"
        self._counted = False
        mine = self.open_by_client.get(self._peer, 0)
        if sum(self.open_by_client.values()) >= self.limits.max_connections:
            self._refuse(f"{self.limits.max_connections} connections are open")
        elif mine >= self.limits.max_connections_per_client:
            self._refuse(f"{mine} connections from {self._peer} are open")
        else:
            self.open_by_client[self._peer] = mine + 1
            self._counted = True
            self._wait()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        self.receiving.pop(self, None)
        if self._counted:
            self._counted = False
            self.open_by_client[self._peer] -= 1
            if not self.open_by_client[self._peer]:
                del self.open_by_client[self._peer]
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # a request head arrived
            self._stop_waiting()
        if self.conn.their_state is h11.SEND_BODY:
            if self not in self.receiving:
                self.receiving[self] = None
                while len(self.receiving) > self.limits.max_receiving_bodies:
                    oldest, _ = self.receiving.popitem(last=False)
                    oldest._drop()
        else:
            self.receiving.pop(self, None)

    def _refuse(self, why: str) -> None:
        """Answer 503 (retry in a second) before reading anything, and close."""
        self.quiet.log(
            logging.WARNING, f"503:{self._peer}", "refused a connection from %s: %s", self._peer, why
        )
        body = json.dumps({"error": f"the server is busy: {why}; retry later"}).encode()
        head = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._wait()  # kept alive: waiting for the next head

    def _wait(self) -> None:
        if self in self.waiting:
            return
        self.waiting[self] = self.loop.call_later(self.limits.header_timeout_s, self._drop)
        while len(self.waiting) > self.limits.max_waiting_connections:
            oldest, timer = self.waiting.popitem(last=False)
            timer.cancel()
            oldest._drop()

    def _stop_waiting(self) -> None:
        timer = self.waiting.pop(self, None)
        if timer is not None:
            timer.cancel()

    def _drop(self) -> None:
        self._stop_waiting()
        self.receiving.pop(self, None)
        if not self.transport.is_closing():
            self.transport.close()


# --------------------------------------------------------------------------- requests


class BearerAuth:
    """ASGI middleware: every path but /health needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()
        self._quiet = QuietLog()  # refusals, once per client per minute

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != HEALTH_PATH:
            scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self._token):
                message = "missing bearer token" if not given else "wrong bearer token"
                client = scope.get("client") or ("unknown", 0)
                self._quiet.log(
                    logging.WARNING,
                    f"401:{client[0]}",
                    "refused %s %s from %s: 401 %s",
                    scope["method"],
                    scope["path"],
                    client[0],
                    message,
                )
                response = error_response(
                    401,
                    message,
                    headers={"WWW-Authenticate": 'Bearer realm="cuda-agent"', "Connection": "close"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def requester(request: Request) -> str:
    """Whose request this is: its credential (the ``Authorization`` header, hashed), never its
    source address (any local user can send from any of 127.0.0.0/8).  Caps in flight count per
    requester, and a worker's evaluation id names a job only for its requester: another token's
    holder can neither cancel nor attach to it.  Holders of one shared token are told apart by the
    ids themselves, which clients make unguessable (:class:`sandbox.remote.RemoteExecutor`)."""
    auth = request.headers.get("authorization", "")
    return (
        "token:" + hashlib.sha256(auth.encode("utf-8", "replace")).hexdigest()[:16] if auth else "anonymous"
    )


class AsciiJSON(JSONResponse):
    """JSON with every non-ASCII character escaped: a message that echoes a lone surrogate from a
    request still renders (Starlette's JSONResponse would fail to encode it: a 500)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """``{"error": message}`` with ``status``: how every refusal of these services reads."""
    return AsciiJSON({"error": message}, status_code=status, headers=headers)


_QUIET = QuietLog()


async def read_body(
    request: Request,
    limit: int,
    timeout_s: float = BODY_TIMEOUT_S,
    min_rate: int = MIN_BODY_RATE,
    quiet: QuietLog | None = None,
) -> bytes | Response:
    """The request's body: 413 past ``limit`` bytes, 408 unless it arrives within ``timeout_s``
    plus a second per ``min_rate`` declared bytes, 400 (logged through ``quiet``) if the client
    leaves."""
    too_large = error_response(413, f"request body larger than {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or len(declared) > 18 or int(declared) > limit):
        return too_large if declared.isdigit() else error_response(400, "bad Content-Length")
    allowed_s = timeout_s + int(declared or 0) / min_rate
    loop = asyncio.get_running_loop()
    deadline = loop.time() + allowed_s
    chunks: list[bytes] = []
    size = 0
    stream = request.stream()
    try:
        while True:
            try:
                chunk = await asyncio.wait_for(stream.__anext__(), max(deadline - loop.time(), 0.0))
            except StopAsyncIteration:
                break
            size += len(chunk)
            if size > limit:
                return too_large
            chunks.append(chunk)
    except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
        return error_response(
            408, f"request body not received within {allowed_s:.0f} s", {"Connection": "close"}
        )
    except ClientDisconnect:
        client = request.client.host if request.client else "unknown"
        (quiet or _QUIET).log(
            logging.INFO, f"gone:{client}", "a client at %s left in the middle of its request", client
        )
        return error_response(400, "the client disconnected")
    return b"".join(chunks)
