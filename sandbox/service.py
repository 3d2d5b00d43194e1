"""The ``cuda-agent worker`` HTTP service: any :class:`Executor` served to remote clients.

One lane per GPU: each lane has its own job queue and a thread that feeds its executor one request
at a time; a new request goes to the lane with the least work.  Evaluations stream NDJSON events
(see :mod:`sandbox.remote` for the protocol).  A request id is idempotent: the same request posted
again attaches to the running job or gets the cached result; a finished id posted with another
request runs that request (callers make ids unique; a running id is never shared).  A job nobody watches any more (every client
disconnected and none came back within ``disconnect_grace_s``) is cancelled, as is one named by
``POST /cancel``.

Security: a bearer token (compared with :func:`hmac.compare_digest`) on every endpoint but
``/health``; :func:`check_listen_policy` refuses a non-loopback address without one.  Only JSON
``EvalRequest`` bodies are accepted (CUDA source and numbers: nothing that runs on the host), no
larger than ``max_body_bytes`` (413), whose kernels pass :func:`sandbox.boundary.check_kernel`
(allowed NVRTC options, plain filenames: 422 naming what is refused); at most ``max_per_client``
evaluations per token and ``max_in_flight`` in all at once (429).  A request id names a job only
for the requester that sent it (its token): only they attach to it or cancel it.

Needs the ``worker`` extra (Starlette, uvicorn).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import queue
import resource
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import h11
import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from sandbox.boundary import check_kernel
from sandbox.contract import (
    ContractError,
    EvalRequest,
    Progress,
    RequestError,
    RequestLimits,
    Status,
    from_dict,
    from_json,
    to_dict,
    to_json,
    validate_request,
)
from sandbox.executor import Executor, ExecutorError
from sandbox.http_wire import (
    CANCEL_PATH,
    DEVICE_PATH,
    EVALUATE_PATH,
    HEALTH_PATH,
    HEARTBEAT_S,
    NDJSON,
    CancelReply,
    CancelRequest,
    ErrorEvent,
    FinalEvent,
    HeartbeatEvent,
    ProgressEvent,
    QueuedEvent,
    ResultEvent,
    StartedEvent,
    StreamEvent,
    encode_event,
)

log = logging.getLogger(__name__)


BODY_TIMEOUT_S = 10.0
MIN_BODY_RATE = 64 << 10


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 8 << 20
    max_per_client: int = 8  # evaluations in flight per token (requester), not per address
    max_in_flight: int = 64  # evaluations in flight in all
    heartbeat_s: float = HEARTBEAT_S
    disconnect_grace_s: float = 10.0  # an unwatched job is cancelled after this
    cached_results: int = 1024  # finished results kept for repeated request ids
    request: RequestLimits = field(default_factory=RequestLimits)  # what one evaluation may ask for
    header_timeout_s: float = 10.0  # a connection must send a whole request head this fast
    keep_alive_s: float = 5.0  # an idle kept-alive connection is closed after this
    max_waiting_connections: int = 256  # connections that have not sent a request head yet
    trusted_proxies: tuple[str, ...] = ()  # peers whose X-Forwarded-For names the client
    body_timeout_s: float = BODY_TIMEOUT_S  # a request body must arrive this fast (408)...
    min_body_rate: int = MIN_BODY_RATE  # ...plus one second per this many declared bytes
    max_connections: int = 1024  # open connections in all (503), at most half the open-file limit
    max_connections_per_client: int = 128  # open connections from one address (503)
    max_receiving_bodies: int = 64  # connections sending a body; past it the oldest is closed
    log_interval_s: float = 60.0  # a refusal (401, 503) or disconnect is logged once per client per interval


# --------------------------------------------------------------------------- listening policy


def is_loopback(host: str) -> bool:
    """True if every address ``host`` resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def check_listen_policy(host: str, token: str | None) -> str | None:
    """Why the worker must not listen on ``host`` with this token, or None if it may."""
    if token or is_loopback(host):
        return None
    return (
        f"refusing to listen on {host} without --token-file: anyone who can reach it could run code on "
        "your GPU (use a token, or listen on 127.0.0.1 and connect through an SSH tunnel)"
    )


def check_tls(cert: str | None, key: str | None) -> str | None:
    """Why the TLS files cannot be used, or None (also when TLS is off)."""
    if key and not cert:
        return "--tls-key needs --tls-cert"
    if not cert:
        return None
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        return f"cannot use TLS certificate {cert}{' / key ' + key if key else ''}: {getattr(exc, 'strerror', None) or exc}"
    return None


def listen(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket (port 0: any free port). Raises OSError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(512)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def make_server(
    app: ASGIApp,
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    log_level: str = "info",
    limits: Limits = Limits(),
) -> _QuietServer:
    """A uvicorn server for ``app``; run it with ``server.run(sockets=[listen(host, port)])``.

    No overall connection cap (uvicorn's ``limit_concurrency`` answers every request 503 while idle
    connections fill it): connections that have not sent a request head, unauthenticated by
    definition, are bounded by :class:`_GuardedH11` instead; X-Forwarded-For is read only from
    ``limits.trusted_proxies``."""
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
    return _QuietServer(config, quiet)


class _QuietServer(uvicorn.Server):
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
    limits: ClassVar[Limits]
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
        body = json.dumps({"error": f"the worker is busy: {why}; retry later"}).encode()
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


# --------------------------------------------------------------------------- jobs and lanes


class _Job:
    """One evaluation: its cancel event, its subscribers (one queue per open stream), and the latest
    state to replay to a client that attaches late.  Mutated only on the event loop; the lane thread
    reaches it through :meth:`post`."""

    def __init__(
        self, request: EvalRequest, digest: str, loop: asyncio.AbstractEventLoop, owner: str
    ) -> None:
        self.request = request
        self.digest = digest
        self.owner = owner  # who sent it (_requester): only they can attach to it or cancel it
        self.loop = loop
        self.cancel = threading.Event()
        self.subscribers: set[asyncio.Queue[StreamEvent]] = set()
        self.latest: dict[str, StreamEvent] = {}  # by event kind: queued, started, progress
        self.final: FinalEvent | None = None
        self.abandoned = False

    def post(self, event: StreamEvent, then: Callable[[], None] | None = None) -> None:
        """From any thread: publish ``event`` on the loop, then run ``then`` there."""

        def publish() -> None:
            self.publish(event)
            if then is not None:
                then()

        self.loop.call_soon_threadsafe(publish)

    def publish(self, event: StreamEvent) -> None:
        if isinstance(event, ResultEvent | ErrorEvent):
            self.final = event
        else:
            if isinstance(event, StartedEvent):
                self.latest.pop(QueuedEvent.kind, None)
            self.latest[event.kind] = event
        for subscriber in self.subscribers:
            subscriber.put_nowait(event)

    def snapshot(self) -> list[StreamEvent]:
        return [self.final] if self.final is not None else list(self.latest.values())


class _Lane:
    """One GPU: a queue of jobs and a thread that runs them on the GPU's executor in turn."""

    def __init__(self, index: int, executor: Executor, finished: Callable[[_Job, _Lane], None]) -> None:
        self.index = index
        self.executor = executor
        self.load = 0  # queued + running; touched only on the event loop
        self._finished = finished
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"gpu-lane-{index}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._jobs.put(None)
        self._thread.join(timeout)

    def submit(self, job: _Job) -> None:
        job.publish(QueuedEvent(self.index, self.load))
        self.load += 1
        self._jobs.put(job)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._evaluate(job)

    def _evaluate(self, job: _Job) -> None:
        job.post(StartedEvent(self.index))

        def progress(p: Progress) -> None:
            job.post(ProgressEvent(p))

        event: FinalEvent
        try:
            event = ResultEvent(self.executor.evaluate(job.request, progress=progress, cancel=job.cancel))
        except ExecutorError as exc:
            event = ErrorEvent(str(exc))
        except Exception as exc:
            log.exception("evaluation %s crashed the executor", job.request.id)
            event = ErrorEvent(f"internal error on the worker: {type(exc).__name__}: {exc}")
        job.post(event, then=functools.partial(self._finished, job, self))


# --------------------------------------------------------------------------- the service


class WorkerService:
    """The HTTP application over one executor per GPU; ``app`` is the ASGI application."""

    def __init__(
        self,
        executors: Sequence[Executor],
        *,
        token: str | None,
        limits: Limits = Limits(),
        simulated: bool = False,
        isolation: str = "none",
    ) -> None:
        """``isolation``: how compiles of requests are isolated from this host
        (:func:`sandbox.compile_pool.compile_isolation`), said in ``/health``."""
        if not executors:
            raise ValueError("a worker needs at least one executor")
        self.limits = limits
        self.simulated = simulated  # the executors are simulated GPUs (said in /health and /device)
        self.isolation = isolation
        self.quiet = QuietLog(limits.log_interval_s)  # disconnects, logged once per client per interval
        self.lanes = [_Lane(i, e, self._finished) for i, e in enumerate(executors)]
        # jobs by (requester, id): a request id names a job only for whoever sent it (_requester)
        self.running: dict[tuple[str, str], _Job] = {}
        self.done: OrderedDict[tuple[str, str], tuple[str, ResultEvent]] = (
            OrderedDict()
        )  # -> (digest, result)
        self.clients: dict[str, int] = {}  # evaluations in flight by requester
        app = Starlette(
            routes=[
                Route(HEALTH_PATH, self.health, methods=["GET"]),
                Route(DEVICE_PATH, self.device, methods=["GET"]),
                Route(EVALUATE_PATH, self.evaluate, methods=["POST"]),
                Route(CANCEL_PATH, self.cancel, methods=["POST"]),
            ],
            lifespan=self._lifespan,
        )
        self.app: ASGIApp = _BearerAuth(app, token) if token else app

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        for lane in self.lanes:
            lane.start()
        try:
            yield
        finally:
            for job in self.running.values():
                job.cancel.set()
            for lane in self.lanes:
                await run_in_threadpool(lane.stop, 10.0)

    # ---------------------------------------------------------------- endpoints

    async def health(self, request: Request) -> Response:
        """``ok`` with the number of GPUs (simulated or not) and the compiles' isolation; 503
        ``no_gpu`` when there is none."""
        about = {"simulated": self.simulated, "isolation": self.isolation}
        try:
            count = await run_in_threadpool(lambda: len([lane.executor.device_info() for lane in self.lanes]))
        except ExecutorError as exc:
            return JSONResponse({"status": "no_gpu", "error": str(exc), **about}, status_code=503)
        return JSONResponse({"status": "ok", "gpus": count, **about})

    async def device(self, request: Request) -> Response:
        try:
            infos = await run_in_threadpool(
                lambda: [to_dict(lane.executor.device_info()) for lane in self.lanes]
            )
        except ExecutorError as exc:
            return _error(503, str(exc))
        return JSONResponse({"devices": infos, "simulated": self.simulated})

    async def cancel(self, request: Request) -> Response:
        body = await _read_body(
            request, 64 << 10, self.limits.body_timeout_s, self.limits.min_body_rate, self.quiet
        )
        if isinstance(body, Response):
            return body
        try:
            request_id = from_json(CancelRequest, body).id
        except ContractError:
            return _error(400, 'expected {"id": "<request id>"}')
        key = (_requester(request), request_id)  # only its requester can cancel an evaluation
        job = self.running.get(key)
        if job is not None:
            job.cancel.set()
            log.info("cancel requested for %s", request_id)
            return JSONResponse(to_dict(CancelReply(request_id, cancelled=True)))
        if key in self.done:
            return JSONResponse(to_dict(CancelReply(request_id, cancelled=False, finished=True)))
        return _error(404, f"no evaluation with id {request_id!r}")

    async def evaluate(self, request: Request) -> Response:
        client = _requester(request)
        if self.clients.get(client, 0) >= self.limits.max_per_client:
            return _error(
                429,
                f"{self.limits.max_per_client} evaluations with this token are already in flight",
                headers={"Retry-After": "1"},
            )
        if sum(self.clients.values()) >= self.limits.max_in_flight:
            return _error(
                429, f"{self.limits.max_in_flight} evaluations are in flight", headers={"Retry-After": "1"}
            )
        body = await _read_body(
            request,
            self.limits.max_body_bytes,
            self.limits.body_timeout_s,
            self.limits.min_body_rate,
            self.quiet,
        )
        if isinstance(body, Response):
            return body
        parsed = _parse_request(body, self.limits.request)
        if isinstance(parsed, Response):
            return parsed
        digest = hashlib.sha256(to_json(parsed).encode()).hexdigest()  # the request, not its spelling

        key = (client, parsed.id)
        cached = self.done.get(key)
        job = self.running.get(key)
        if (
            job and job.digest != digest
        ):  # two live evaluations under one id: cancel could not tell them apart
            return _error(409, f"request id {parsed.id!r} is in use by a different running request")
        if cached and cached[0] == digest:  # a replay: the same request again
            return _EventStream(_replay([cached[1]]), on_close=lambda: None)
        if job is None:
            job = self.running[key] = _Job(parsed, digest, asyncio.get_running_loop(), client)
            min(self.lanes, key=lambda lane: lane.load).submit(job)
        else:
            log.info("client reattached to %s", parsed.id)

        subscriber: asyncio.Queue[StreamEvent] = asyncio.Queue()
        snapshot = job.snapshot()  # taken together with subscribing: no event is lost or doubled
        job.subscribers.add(subscriber)
        self.clients[client] = self.clients.get(client, 0) + 1

        def on_close(job: _Job = job) -> None:
            self.clients[client] -= 1
            if not self.clients[client]:
                del self.clients[client]
            job.subscribers.discard(subscriber)
            if job.final is None and not job.subscribers:
                job.loop.call_later(self.limits.disconnect_grace_s, self._abandon_if_unwatched, job)

        return _EventStream(self._follow(snapshot, subscriber), on_close=on_close)

    # ---------------------------------------------------------------- bookkeeping (event loop)

    async def _follow(
        self, snapshot: list[StreamEvent], subscriber: asyncio.Queue[StreamEvent]
    ) -> AsyncIterator[bytes]:
        for event in snapshot:
            yield encode_event(event)
            if isinstance(event, ResultEvent | ErrorEvent):
                return
        while True:
            try:
                event = await asyncio.wait_for(subscriber.get(), self.limits.heartbeat_s)
            except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
                event = HeartbeatEvent()
            yield encode_event(event)
            if isinstance(event, ResultEvent | ErrorEvent):
                return

    def _abandon_if_unwatched(self, job: _Job) -> None:
        if job.final is None and not job.subscribers:
            log.info("no client is waiting for %s any more; cancelling it", job.request.id)
            job.abandoned = True
            job.cancel.set()

    def _finished(self, job: _Job, lane: _Lane) -> None:
        lane.load -= 1
        self.running.pop((job.owner, job.request.id), None)
        final = job.final
        _log_outcome(job.request, final, job.abandoned)
        # Results of abandoned jobs are not kept: a client that comes back later gets a fresh run.
        if isinstance(final, ResultEvent) and not job.abandoned:
            self.done[(job.owner, job.request.id)] = (job.digest, final)
            while len(self.done) > self.limits.cached_results:
                self.done.popitem(last=False)


def _log_outcome(request: EvalRequest, final: FinalEvent | None, abandoned: bool) -> None:
    """One line per evaluation: done (the baseline's verdict, candidates ok), cancelled or failed."""
    what = f"evaluation {request.id} ({len(request.candidates)} candidates)"
    if isinstance(final, ResultEvent):
        result = final.result
        ok = sum(1 for c in result.candidates if c.status == Status.OK)
        cancelled = " after the client left" if abandoned else ""
        log.info("%s: done%s, baseline %s, %d ok", what, cancelled, result.baseline.status.value, ok)
    else:
        log.warning("%s: failed: %s", what, final.message if final else "no result")


# --------------------------------------------------------------------------- HTTP helpers


class _EventStream(StreamingResponse):
    """An NDJSON event stream that runs ``on_close`` however it ends (finished, client gone,
    server shutting down)."""

    def __init__(self, events: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(events, media_type=NDJSON, headers={"Cache-Control": "no-store"})
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


class _BearerAuth:
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
                response = _error(
                    401,
                    message,
                    headers={"WWW-Authenticate": 'Bearer realm="cuda-agent"', "Connection": "close"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _requester(request: Request) -> str:
    """Whose request this is: its credential (the ``Authorization`` header, hashed), never its
    source address (any local user can send from any of 127.0.0.0/8).  Caps in flight count per
    requester, and an evaluation id names a job only for its requester: another token's holder
    can neither cancel nor attach to it.  Holders of one shared token are told apart by the ids
    themselves, which clients make unguessable (:class:`sandbox.remote.RemoteExecutor`)."""
    auth = request.headers.get("authorization", "")
    return (
        "token:" + hashlib.sha256(auth.encode("utf-8", "replace")).hexdigest()[:16] if auth else "anonymous"
    )


class _AsciiJSON(JSONResponse):
    """JSON with every non-ASCII character escaped: a message that echoes a lone surrogate from a
    request still renders (Starlette's JSONResponse would fail to encode it: a 500)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _AsciiJSON({"error": message}, status_code=status, headers=headers)


class QuietLog:
    """Logs a recurring event (a refused token, a connection refused, a client gone mid-upload)
    once per key per ``interval_s``, saying how many were left out since: a flood of them cannot
    fill the log."""

    def __init__(self, interval_s: float = 60.0) -> None:
        self.interval_s = interval_s
        self._last: OrderedDict[str, tuple[float, int]] = OrderedDict()  # key -> (logged at, left out)

    def log(self, level: int, key: str, message: str, *args: object) -> None:
        now = time.monotonic()
        logged, left_out = self._last.get(key, (-math.inf, 0))
        if now - logged < self.interval_s:
            self._last[key] = (logged, left_out + 1)
            return
        more = f" (and {left_out} more like it in the last {self.interval_s:.0f} s)" if left_out else ""
        log.log(level, message + more, *args)
        self._last[key] = (now, 0)
        self._last.move_to_end(key)
        while len(self._last) > 4096:  # many clients: forget the oldest
            self._last.popitem(last=False)


_QUIET = QuietLog()


async def _replay(events: list[StreamEvent]) -> AsyncIterator[bytes]:
    for event in events:
        yield encode_event(event)


async def _read_body(
    request: Request,
    limit: int,
    timeout_s: float = BODY_TIMEOUT_S,
    min_rate: int = MIN_BODY_RATE,
    quiet: QuietLog | None = None,
) -> bytes | Response:
    """The request's body: 413 past ``limit`` bytes, 408 unless it arrives within ``timeout_s``
    plus a second per ``min_rate`` declared bytes, 400 (logged through ``quiet``) if the client
    leaves."""
    too_large = _error(413, f"request body larger than {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or len(declared) > 18 or int(declared) > limit):
        return too_large if declared.isdigit() else _error(400, "bad Content-Length")
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
        return _error(408, f"request body not received within {allowed_s:.0f} s", {"Connection": "close"})
    except ClientDisconnect:
        client = request.client.host if request.client else "unknown"
        (quiet or _QUIET).log(
            logging.INFO, f"gone:{client}", "a client at %s left in the middle of its request", client
        )
        return _error(400, "the client disconnected")
    return b"".join(chunks)


class _HugeInt:
    """Stands in for an integer literal too long to convert (Python refuses over 4,300 digits)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _int_or_huge(text: str) -> int | _HugeInt:
    return int(text) if len(text) <= 4000 else _HugeInt(len(text))


def _undecodable(data: Any) -> tuple[str, str] | None:
    """``(field, why)`` for the first value of decoded JSON that no field can take: a string (or
    key) with a lone surrogate, an integer of thousands of digits; None when there is none."""
    pending: list[tuple[str, Any]] = [("", data)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, _HugeInt):
            return where, f"an integer of {value.digits} digits"
        if isinstance(value, str) and not _encodable(value):
            return where, "a string with a lone surrogate (not Unicode text)"
        if isinstance(value, dict):
            for key, item in value.items():
                if not _encodable(key):
                    return where or "body", "a key with a lone surrogate (not Unicode text)"
                pending.append((f"{where}.{key}" if where else key, item))
        elif isinstance(value, list):
            pending += [(f"{where}[{i}]", item) for i, item in enumerate(value)]
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _parse_request(body: bytes, limits: RequestLimits) -> EvalRequest | Response:
    try:
        data = json.loads(body, parse_int=_int_or_huge)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return _error(400, f"body is not JSON: {exc}")
    except RecursionError:
        return _error(400, "body is not JSON: nested too deeply")
    if bad := _undecodable(data):
        where, what = bad
        return _AsciiJSON({"error": f"{where}: {what}", "field": where}, status_code=422)
    try:
        request = from_dict(EvalRequest, data)
        validate_request(request, limits)
    except RequestError as exc:
        return _AsciiJSON({"error": str(exc), "field": exc.field}, status_code=422)
    except ContractError as exc:
        return _error(422, str(exc))
    for kernel in [request.baseline, *(c.kernel for c in request.candidates)]:
        if why := check_kernel(kernel):
            return _error(422, why)
    return request
